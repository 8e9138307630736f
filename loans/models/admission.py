"""What a contract may use past its commitment: its overage policy, each setting kept with who
set it and when (the latest is in force). The schedulers enforce it (loans.schedulers.slurm.budgets,
loans.maths.admission)."""

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from loans.models.contracts import Contract
from loans.models.fields import non_negative


class OveragePolicy(models.Model):
    class Kind(models.TextChoices):
        ALLOW = "allow", _("allow overage")
        BUDGET = "budget", _("allow overage up to a budget a period")
        HOLD = "hold", _("hold at the commitment")

    contract = models.ForeignKey(Contract, verbose_name=_("contract"), on_delete=models.CASCADE,
                                 related_name="overage_policies")
    kind = models.CharField(_("overage policy"), max_length=8, choices=Kind.choices)
    budget = models.DecimalField(
        _("overage budget a period"), max_digits=18, decimal_places=4, null=True, blank=True,
        validators=non_negative(), help_text=_("Money a period, in the contract's currency; "
                                               "only for a budget."))
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("set by"), null=True,
                               blank=True, on_delete=models.SET_NULL, related_name="+")
    set_at = models.DateTimeField(_("set at"))

    class Meta:
        verbose_name = _("overage policy")
        verbose_name_plural = _("overage policies")
        ordering = ["-set_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="budget") & Q(budget__isnull=False) & Q(budget__gte=0))
                | (~Q(kind="budget") & Q(budget__isnull=True)),
                name="overage_policy_budget_only_for_a_budget",
                violation_error_message=_("A budget is given with the budget policy, and only "
                                          "with it; it is never negative.")),
        ]

    def __str__(self) -> str:
        return f"{self.contract}: {self.kind}"


def policy_of(contract: Contract) -> tuple[str, Decimal | None]:
    """The policy in force: the latest set, or allow (today's behaviour) where none was."""
    latest = contract.overage_policies.order_by("-set_at", "-pk").first()
    return (latest.kind, latest.budget) if latest else (OveragePolicy.Kind.ALLOW, None)


def policies_of(contract_ids: list[int]) -> dict[int, tuple[str, Decimal | None]]:
    """policy_of for many contracts, in one query; allow where none was set."""
    out: dict[int, tuple[str, Decimal | None]] = {}
    for policy in OveragePolicy.objects.filter(contract_id__in=contract_ids).order_by(
            "contract_id", "-set_at", "-pk"):
        out.setdefault(policy.contract_id, (policy.kind, policy.budget))
    return {pk: out.get(pk, (OveragePolicy.Kind.ALLOW, None)) for pk in contract_ids}
