"""The operators' admin site: Django's, plus the raw usage samples.

Samples are keyed by (GPU, timestamp), a composite key that ModelAdmin cannot register, so they
get a read-only list view of their own, shown in the index beside metering's models.
"""

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _


class GpuLoansAdminSite(admin.AdminSite):
    site_header = "gpuloans"
    site_title = "gpuloans"
    index_title = _("Operations")

    def get_urls(self):
        from metering.admin_samples import sample_list

        own = [
            path(
                "metering/usagesample/",
                self.admin_view(sample_list),
                name="metering_usagesample_changelist",
            ),
        ]
        return own + super().get_urls()

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        if not request.user.has_perm("metering.view_usagesample"):
            return apps
        for app in apps:
            if app["app_label"] == "metering":
                app["models"].append(
                    {
                        "name": _("Usage samples"),
                        "object_name": "UsageSample",
                        "admin_url": reverse("admin:metering_usagesample_changelist"),
                        "add_url": None,
                        "perms": {"view": True},
                        "view_only": True,
                    }
                )
                app["models"].sort(key=lambda model: str(model["name"]))
        return apps


class GpuLoansAdminConfig(AdminConfig):
    default_site = "config.admin.GpuLoansAdminSite"
