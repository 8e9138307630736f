"""Alerts: one open alert per kind and subject, resolved when its condition clears."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.wording import said
from loans.models.tenants import Tenant


class Alert(models.Model):
    """A condition worth a lead's or an operator's attention, with its lifetime as history."""

    class Kind(models.TextChoices):
        COMMITMENT_USED = "commitment_used", _("commitment used")
        PROJECTED_OVERAGE = "projected_overage", _("projected overage")
        PROJECTED_UNUSED = "projected_unused", _("projected unused commitment")
        IDLE_GPUS = "idle_gpus", _("idle GPUs")
        NODE_SILENT = "node_silent", _("node silent")
        INCOMPLETE_DATA = "incomplete_data", _("incomplete data")
        DEVICE_REFUSED = "device_refused", _("device refused")
        METER_MISMATCH = "meter_mismatch", _("meters disagree")
        BUDGET_USED = "budget_used", _("overage budget spent")
        GROUP_RUNNING_OUT = "group_running_out", _("sharing group running out")
        ALL_LENT = "all_lent", _("unused hours all lent")
        GUARANTEE_AT_RISK = "guarantee_at_risk", _("guarantee at risk")
        CHANNEL_FAILING = "channel_failing", _("chat channel failing")

    class State(models.TextChoices):
        OPEN = "open", _("open")
        RESOLVED = "resolved", _("resolved")

    tenant = models.ForeignKey(
        Tenant, verbose_name=_("tenant"), on_delete=models.CASCADE, null=True, blank=True,
        related_name="alerts",
        help_text=_("Empty for the operators' own alerts (a node without a default tenant)."),
    )
    kind = models.CharField(_("kind"), max_length=24, choices=Kind.choices)
    subject = models.CharField(_("subject"), max_length=120,
                               help_text=_("What the alert is about, e.g. contract:3:period:4."))
    state = models.CharField(_("state"), max_length=10, choices=State.choices,
                             default=State.OPEN)
    message = models.TextField(_("message"))
    wording = models.JSONField(
        _("wording"), default=dict, blank=True, editable=False,
        help_text=_("The message's template and facts, rendered in the reader's language; "
                    "message is its English."))
    details = models.JSONField(_("details"), default=dict, blank=True)
    opened_at = models.DateTimeField(_("opened"))
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)

    class Meta:
        ordering = ["-opened_at"]
        verbose_name = _("alert")
        verbose_name_plural = _("alerts")
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "subject"], condition=Q(state="open"), name="alert_open_once",
                violation_error_message=_("This alert is already open."),
            ),
            models.CheckConstraint(condition=Q(state__in=["open", "resolved"]),
                                   name="alert_state_known"),
        ]
        indexes = [models.Index(fields=["tenant", "state"], name="alert_tenant_state")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.subject} ({self.get_state_display()})"

    @property
    def text(self) -> str:
        """The message in the reader's language."""
        return said(self.wording, self.message)
