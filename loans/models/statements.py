"""Statements: the closed, immutable result of a period."""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from loans.models.contracts import Contract


class Statement(models.Model):
    """The closed, immutable result of one period. Written once; never updated."""

    contract = models.ForeignKey(Contract, on_delete=models.PROTECT, related_name="statements")
    period_index = models.PositiveSmallIntegerField(_("period"))
    period_start = models.DateTimeField(_("period start"))
    period_end = models.DateTimeField(_("period end"))
    committed_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6)
    allocated_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6)
    busy_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6)
    adjustment_gpu_hours = models.DecimalField(
        max_digits=16, decimal_places=6, default=Decimal(0),
        help_text=_("Late usage of earlier, already closed periods, billed in this one."),
    )
    overage_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6)
    unused_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6)
    committed_rate = models.DecimalField(max_digits=12, decimal_places=4)
    overage_rate = models.DecimalField(max_digits=12, decimal_places=4)
    committed_cost = models.DecimalField(max_digits=16, decimal_places=2)
    overage_cost = models.DecimalField(max_digits=16, decimal_places=2)
    total_cost = models.DecimalField(max_digits=16, decimal_places=2)
    currency = models.CharField(max_length=3)
    completeness = models.DecimalField(
        max_digits=5, decimal_places=4, help_text=_("Share of expected samples received, 0-1.")
    )
    closed_at = models.DateTimeField(_("closed"), auto_now_add=True)

    class Meta:
        ordering = ["contract", "period_index"]
        verbose_name = _("statement")
        verbose_name_plural = _("statements")
        constraints = [
            models.UniqueConstraint(
                fields=["contract", "period_index"],
                name="statement_once_per_period",
                violation_error_message=_("This period already has a statement."),
            ),
            models.CheckConstraint(
                condition=Q(period_end__gt=F("period_start")), name="statement_period_forward"
            ),
            models.CheckConstraint(
                condition=Q(completeness__gte=0) & Q(completeness__lte=1),
                name="statement_completeness_is_a_share",
            ),
            models.CheckConstraint(
                condition=Q(total_cost=F("committed_cost") + F("overage_cost")),
                name="statement_total_adds_up",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contract} period {self.period_index + 1}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValidationError(_("A closed statement is never rewritten."))
        super().save(*args, **kwargs)
