"""The operators' admin site: Django's, plus the raw usage samples, and every form's unreadable
input refused as a form error (core.admin_input).

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

    def register(self, model_or_iterable, admin_class=None, **options):
        """Every model admin, the project's and Django's own (users, groups), refuses what
        its fields cannot read as a form error (core.admin_input)."""
        from core.admin_input import ReadableInput

        admin_class = admin_class or admin.ModelAdmin
        if not issubclass(admin_class, ReadableInput):
            admin_class = type(admin_class.__name__, (ReadableInput, admin_class), {})
        super().register(model_or_iterable, admin_class, **options)

    def has_permission(self, request) -> bool:
        """The admin is the operators' (core.roles): a staff user outside the operators group
        holding single permissions reads and writes nothing here, as in the API and the
        pages; within the role, each model's permissions still apply."""
        from loans.access import allowed  # the apps' models: loaded after this site

        return allowed(request.user, "use-admin")

    def login(self, request, extra_context=None):
        """The admin's login form says so when an attempt was refused unchecked
        (config.auth.AccountCeilingBackend). Imported here: forms need the apps loaded."""
        from config.auth import SlowedAdminAuthenticationForm

        self.login_form = SlowedAdminAuthenticationForm
        return super().login(request, extra_context)

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
