from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MeteringConfig(AppConfig):
    name = "metering"
    verbose_name = _("Metering")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from metering.intake.ingest import forget_nodes, forget_rules
        from metering.models import AttributionRule, Node

        post_save.connect(forget_rules, sender=AttributionRule, dispatch_uid="rules-saved")
        post_delete.connect(forget_rules, sender=AttributionRule, dispatch_uid="rules-deleted")
        # A cached node carries its token and default tenant: forget it when either changes.
        post_save.connect(forget_nodes, sender=Node, dispatch_uid="nodes-saved")
        post_delete.connect(forget_nodes, sender=Node, dispatch_uid="nodes-deleted")
        post_delete.connect(forget_nodes, sender="loans.Tenant", dispatch_uid="tenant-deleted")
