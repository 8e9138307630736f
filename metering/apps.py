from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MeteringConfig(AppConfig):
    name = "metering"
    verbose_name = _("Metering")
    default_auto_field = "django.db.models.BigAutoField"
