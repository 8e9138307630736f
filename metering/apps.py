from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MeteringConfig(AppConfig):
    name = "metering"
    verbose_name = _("Metering")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from metering.ingest import forget_rules
        from metering.models import AttributionRule

        post_save.connect(forget_rules, sender=AttributionRule, dispatch_uid="rules-saved")
        post_delete.connect(forget_rules, sender=AttributionRule, dispatch_uid="rules-deleted")
