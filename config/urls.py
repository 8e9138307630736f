from django.conf.urls.i18n import i18n_patterns
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from config import metrics
from config.auth import SignInView, ThrottledPasswordChangeView
from loans.api import bursts as api_bursts
from loans.api import buy as api_buy
from loans.api import ledger as api_ledger
from loans.api import overage as api_overage
from loans.api import sharing as api_sharing
from loans.api import views as api
from loans.web import advise as views_advise
from loans.web import alerts as views_alerts
from loans.web import audit as views_audit
from loans.web import bursts as views_bursts
from loans.web import buy as views_buy
from loans.web import fleet as views_fleet
from loans.web import heatmap, views
from loans.web import notifications as views_notifications
from loans.web import overage as views_overage
from loans.web import sso as views_sso
from loans.web import tokens as views_tokens
from metering.intake import api as metering_api
from metering.viewsets import ClusterViewSet, NodeViewSet, ReattributionViewSet

router = DefaultRouter()
router.register("tenants", api.TenantViewSet, basename="tenant")
router.register("plans", api.PlanViewSet, basename="plan")
router.register("contracts", api.ContractViewSet, basename="contract")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("nodes", NodeViewSet, basename="node")
router.register("reattributions", ReattributionViewSet, basename="reattribution")
router.register("bursts", api_bursts.BurstViewSet, basename="burst")

urlpatterns = [
    path("i18n/", include("django.conf.urls.i18n")),
    path("healthz", views.healthz, name="healthz"),
    # For pages that name no icon (the browsable API, JSON opened in a browser).
    path("favicon.ico", views.favicon, name="favicon"),
    path("metrics", metrics.view, name="metrics"),
    path("api/v1/samples", metering_api.samples, name="api-samples"),
    path("api/v1/tenants/<slug:slug>/usage", api.TenantUsage.as_view(), name="api-tenant-usage"),
    path("api/v1/tenants/<slug:slug>/buy-vs-loan", api_buy.BuyVsLoan.as_view(),
         name="api-buy-vs-loan"),
    path("api/v1/tenants/<slug:slug>/quota-manifests", api_bursts.QuotaManifests.as_view(),
         name="api-quota-manifests"),
    path("api/v1/contracts/<int:pk>/burndown", api.ContractBurndown.as_view(),
         name="api-contract-burndown"),
    path("api/v1/contracts/<int:pk>/heatmap", heatmap.ContractHeatmap.as_view(),
         name="api-contract-heatmap"),
    path("api/v1/contracts/<int:pk>/overage-policy", api_overage.ContractOveragePolicy.as_view(),
         name="api-contract-overage-policy"),
    path("api/v1/contracts/<int:pk>/statements", api_ledger.ContractStatements.as_view(),
         name="api-contract-statements"),
    path("api/v1/contracts/<int:pk>/amendments", api_ledger.ContractAmendments.as_view(),
         name="api-contract-amendments"),
    path("api/v1/contracts/<int:pk>/terminate", api_ledger.ContractTermination.as_view(),
         name="api-contract-terminate"),
    path("api/v1/sharing-groups/", api_sharing.SharingGroups.as_view(),
         name="api-sharing-groups"),
    path("api/v1/sharing-groups/<int:pk>/", api_sharing.SharingGroupDetail.as_view(),
         name="api-sharing-group"),
    path("api/v1/sharing-groups/<int:pk>/contracts/", api_sharing.SharingGroupContracts.as_view(),
         name="api-sharing-group-contracts"),
    path("api/v1/sharing-groups/<int:pk>/contracts/<int:contract_id>/",
         api_sharing.SharingGroupContract.as_view(), name="api-sharing-group-contract"),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file, so no inline script is needed.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"),
         name="api-docs"),
]
# Single sign-on (OpenID Connect), where configured: outside the language prefix, so the one
# address the provider returns to is the same whatever language the login page was read in.
urlpatterns += [
    path("sso/", views_sso.start, name="oidc_authentication_init"),
    path("sso/callback/", views_sso.callback, name="oidc_authentication_callback"),
    # The name mozilla-django-oidc's session refresh leaves alone; the login's own log-out.
    path("sso/logout/", auth_views.LogoutView.as_view(), name="oidc_logout"),
]
urlpatterns += i18n_patterns(
    path("", views.home, name="home"),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", ThrottledPasswordChangeView.as_view(),
         name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
    path("tenants/<slug:slug>/", views.tenant_page, name="tenant"),
    path("tenants/<slug:slug>/periods.csv", views.periods_csv, name="tenant-periods-csv"),
    path("tenants/<slug:slug>/audit/", views_audit.tenant_audit_page, name="tenant-audit"),
    path("tenants/<slug:slug>/audit.csv", views_audit.tenant_audit_csv,
         name="tenant-audit-csv"),
    re_path(r"^tenants/(?P<slug>[-a-z0-9]+)/recommendations/(?P<pk>[0-9]{1,18})/"
            r"(?P<decision>accept|dismiss)/$", views.decide_recommendation,
            name="recommendation-decide"),
    path("tenants/<slug:slug>/contracts/<int:contract_id>/bursts/", views_bursts.ask,
         name="burst-ask"),
    path("tenants/<slug:slug>/bursts/<int:pk>/cancel/", views_bursts.cancel,
         name="burst-cancel"),
    path("tenants/<slug:slug>/contracts/<int:contract_id>/overage-policy/",
         views_overage.set_policy, name="overage-policy"),
    path("tenants/<slug:slug>/buy-vs-loan/", views_buy.page, name="buy-vs-loan"),
    path("fleet/", views_fleet.fleet_page, name="fleet"),
    path("fleet.csv", views_fleet.fleet_csv, name="fleet-csv"),
    path("alerts/", views_alerts.alerts_page, name="alerts"),
    path("audit/", views_audit.audit_page, name="audit"),
    path("audit.csv", views_audit.audit_csv, name="audit-csv"),
    path("tokens/", views_tokens.tokens_page, name="api-tokens"),
    path("notifications/", views_notifications.page, name="notifications"),
    path("notifications/channels/<int:pk>/remove/", views_notifications.remove_channel,
         name="channel-remove"),
    path("tokens/<int:pk>/revoke/", views_tokens.revoke, name="api-token-revoke"),
    path("advise/", views_advise.operators_page, name="advise"),
    path("tenants/<slug:slug>/advise/", views_advise.tenant_page, name="tenant-advise"),
    path("admin/", admin.site.urls),
    prefix_default_language=True,
)

handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"
