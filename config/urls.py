from django.conf.urls.i18n import i18n_patterns
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from loans import api, views
from metering import api as metering_api
from metering.viewsets import NodeViewSet

router = DefaultRouter()
router.register("tenants", api.TenantViewSet, basename="tenant")
router.register("plans", api.PlanViewSet, basename="plan")
router.register("contracts", api.ContractViewSet, basename="contract")
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = [
    path("i18n/", include("django.conf.urls.i18n")),
    path("healthz", views.healthz, name="healthz"),
    path("api/v1/samples", metering_api.samples, name="api-samples"),
    path("api/v1/tenants/<slug:slug>/usage", api.TenantUsage.as_view(), name="api-tenant-usage"),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
urlpatterns += i18n_patterns(
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    prefix_default_language=True,
)
