from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LoansConfig(AppConfig):
    name = "loans"
    verbose_name = _("Loans")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from loans import schema  # noqa: F401 - registers the OpenAPI auth extension
