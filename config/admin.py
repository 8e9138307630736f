"""The operators' admin site: Django's, plus the raw usage samples.

Samples are keyed by (GPU, timestamp), a composite key that ModelAdmin cannot register, so they
get a read-only list view of their own, shown in the index beside metering's models.
"""

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpResponseBadRequest
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


DATE_PARTS = {"year": (1970, 2999), "month": (1, 12), "day": (1, 31)}


class DatedAdmin(admin.ModelAdmin):
    """A list with a date hierarchy whose `<field>__year` (month, day) is checked before
    Django builds a date from it: `?hour__year=99999999999` answers 400 naming the range,
    instead of an overflow and a 500."""

    def changelist_view(self, request, extra_context=None):
        if self.date_hierarchy:
            for part, (least, most) in DATE_PARTS.items():
                name = f"{self.date_hierarchy}__{part}"
                raw = request.GET.get(name)
                if raw is not None and not (raw.isascii() and raw.isdigit() and len(raw) <= 4
                                            and least <= int(raw) <= most):
                    return HttpResponseBadRequest(
                        _("%(name)s must be a whole number from %(least)s to %(most)s.")
                        % {"name": name, "least": least, "most": most},
                        content_type="text/plain; charset=utf-8")
        return super().changelist_view(request, extra_context)


class ReadOnlyAdmin(DatedAdmin):
    """For records that jobs write and nobody edits: statements, rollups."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class GpuLoansAdminConfig(AdminConfig):
    default_site = "config.admin.GpuLoansAdminSite"
