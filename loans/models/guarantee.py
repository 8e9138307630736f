"""When gpuloans itself held a contract: its overage policy's hold, or a spent budget. The
floor's measure counts nothing in these intervals (DESIGN "The floor"): a team's jobs held by
its own policy were not short of the guarantee."""

from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from loans.models.contracts import Contract


class ContractHold(models.Model):
    """One interval in which the contract's period stood held (loans.maths.admission.HELD):
    opened by the job that notes holds when it finds the period held, closed when it finds it
    no longer so (a new period, a policy that allows overage)."""

    class Reason(models.TextChoices):
        HOLD = "hold", _("held at the commitment")
        BUDGET = "budget", _("overage budget spent")

    contract = models.ForeignKey(Contract, verbose_name=_("contract"), on_delete=models.CASCADE,
                                 related_name="holds")
    reason = models.CharField(_("why"), max_length=8, choices=Reason.choices)
    since = models.DateTimeField(_("held from"))
    until = models.DateTimeField(_("held until"), null=True, blank=True)

    class Meta:
        ordering = ["contract", "since"]
        verbose_name = _("contract hold")
        verbose_name_plural = _("contract holds")
        constraints = [
            models.CheckConstraint(condition=Q(until__isnull=True) | Q(until__gt=F("since")),
                                   name="contract_hold_forward"),
            models.UniqueConstraint(fields=["contract"], condition=Q(until__isnull=True),
                                    name="contract_hold_one_open"),
            models.CheckConstraint(condition=Q(reason__in=["hold", "budget"]),
                                   name="contract_hold_reason_known"),
        ]

    def __str__(self) -> str:
        return f"{self.contract}: {self.reason} from {self.since:%Y-%m-%d %H:%M}"
