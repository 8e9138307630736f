from django.conf.urls.i18n import i18n_patterns
from django.contrib import admin
from django.urls import include, path

from loans import views
from metering import api as metering_api

urlpatterns = [
    path("i18n/", include("django.conf.urls.i18n")),
    path("healthz", views.healthz, name="healthz"),
    path("api/v1/samples", metering_api.samples, name="api-samples"),
]
urlpatterns += i18n_patterns(
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    prefix_default_language=True,
)
