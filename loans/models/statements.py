"""Statements: the closed, immutable result of a period, and the correction lines they carry
for earlier periods."""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q, Value
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from loans.maths import billing
from loans.models.contracts import Contract

# Money is Decimal everywhere, but SQLite keeps a decimal column as a float: a check that money
# adds up compares within a hundredth of the smallest minor unit (exact on PostgreSQL, whose
# numeric difference of amounts is a whole number of minor units; 0.10 + 0.20 on SQLite).
SUM_TOLERANCE = Value(Decimal("0.00001"))
# Amounts keep four places, more than any currency's minor unit (CLF has four; KWD and BHD
# three; JPY none); each is rounded to its own currency's unit before it is stored
# (loans.maths.billing.money) and shown.
MONEY_DIGITS, MONEY_PLACES = 18, 4


def adds_up(field: str, total) -> Q:
    """`field` equals the expression `total`, on every database (see SUM_TOLERANCE)."""
    return (Q(**{f"{field}__gt": total - SUM_TOLERANCE})
            & Q(**{f"{field}__lt": total + SUM_TOLERANCE}))


class Statement(models.Model):
    """The closed, immutable result of one period. Written once; never updated.

    A period statement bills its period (the commitment, and the overage of the usage metered
    by its close) and carries the corrections of earlier periods whose usage changed since
    their statements. After a contract's last period, corrections go on corrections
    statements: one for each later anniversary month that has any, written after its grace.
    """

    class Kind(models.TextChoices):
        PERIOD = "period", _("period")
        CORRECTIONS = "corrections", _("corrections")

    contract = models.ForeignKey(
        Contract, verbose_name=_("contract"), on_delete=models.PROTECT, related_name="statements",
    )
    kind = models.CharField(_("kind"), max_length=12, choices=Kind.choices,
                            default=Kind.PERIOD)
    period_index = models.PositiveSmallIntegerField(_("period"))
    period_start = models.DateTimeField(_("period start"))
    period_end = models.DateTimeField(_("period end"))
    committed_gpu_hours = models.DecimalField(
        _("committed GPU-hours"), max_digits=16, decimal_places=6,
    )
    allocated_gpu_hours = models.DecimalField(
        _("allocated GPU-hours"), max_digits=16, decimal_places=6,
    )
    busy_gpu_hours = models.DecimalField(_("busy GPU-hours"), max_digits=16, decimal_places=6)
    corrections_gpu_hours = models.DecimalField(
        _("corrections in GPU-hours"), max_digits=16, decimal_places=6, default=Decimal(0),
        help_text=_("The change in earlier, already closed periods' usage this statement "
                    "corrects."),
    )
    overage_gpu_hours = models.DecimalField(_("overage GPU-hours"), max_digits=16, decimal_places=6)
    unused_gpu_hours = models.DecimalField(_("unused GPU-hours"), max_digits=16, decimal_places=6)
    committed_rate = models.DecimalField(_("committed rate"), max_digits=12, decimal_places=4)
    overage_rate = models.DecimalField(_("overage rate"), max_digits=12, decimal_places=4)
    committed_cost = models.DecimalField(_("committed cost"), max_digits=MONEY_DIGITS,
                                         decimal_places=MONEY_PLACES)
    overage_cost = models.DecimalField(_("overage cost"), max_digits=MONEY_DIGITS,
                                       decimal_places=MONEY_PLACES)
    corrections_cost = models.DecimalField(
        _("corrections"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, default=Decimal(0),
        help_text=_("The sum of the correction lines; may be negative."),
    )
    plan_name = models.CharField(
        _("plan"), max_length=100, blank=True,
        help_text=_("The plan's name when the statement was written (a plan renamed later "
                    "does not rename old statements)."))
    upfront_fee = models.DecimalField(
        _("upfront fee"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
        default=Decimal(0), help_text=_("The contract's one-time fee, on its first statement."))
    shared_cost = models.DecimalField(
        _("sharing"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, default=Decimal(0),
        help_text=_("Paid for committed GPU-hours borrowed from the group, less credited for "
                    "those lent (the sharing lines); may be negative."))
    standalone_overage_cost = models.DecimalField(
        _("overage cost without sharing"), max_digits=MONEY_DIGITS,
        decimal_places=MONEY_PLACES, null=True, blank=True,
        help_text=_("In a sharing group: what its overage would have cost alone."))
    # The floor (DESIGN "The floor"): the period's availability against its guarantee, the
    # GPU-hours its team was short of its base quota, and the service credit that earned (a
    # negative line of the total). None before the floor was measured.
    availability = models.DecimalField(
        _("availability"), max_digits=9, decimal_places=8, null=True, blank=True,
        help_text=_("The share of the period the base quota was there when asked for."))
    guarantee_pct = models.DecimalField(_("guarantee level (%)"), max_digits=5,
                                        decimal_places=2, null=True, blank=True)
    short_gpu_hours = models.DecimalField(_("short GPU-hours"), max_digits=16,
                                          decimal_places=6, default=Decimal(0))
    credit_pct = models.DecimalField(_("credit (%)"), max_digits=5, decimal_places=2,
                                     default=Decimal(0))
    credit = models.DecimalField(
        _("service credit"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
        default=Decimal(0), help_text=_("Negative: credited for availability below the "
                                        "guarantee's tiers."))
    total_cost = models.DecimalField(_("total"), max_digits=MONEY_DIGITS,
                                     decimal_places=MONEY_PLACES)
    currency = models.CharField(_("currency"), max_length=3)
    completeness = models.DecimalField(
        _("completeness"), max_digits=5, decimal_places=4,
        help_text=_("Share of expected samples received, 0-1."),
    )
    data_from = models.DateTimeField(
        _("data from"), null=True, blank=True,
        help_text=_("The meter's first report of the period, where it came after the period's "
                    "start: the hours before count as missing in the completeness."))
    closed_at = models.DateTimeField(_("closed at"), auto_now_add=True)

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
                condition=adds_up("total_cost", F("committed_cost") + F("overage_cost")
                                  + F("corrections_cost") + F("upfront_fee")
                                  + F("shared_cost") + F("credit")),
                name="statement_total_adds_up",
            ),
            models.CheckConstraint(condition=Q(credit__lte=0), name="statement_credit_credits"),
            models.CheckConstraint(
                condition=Q(kind__in=["period", "corrections"]), name="statement_kind_known"),
        ]

    def __str__(self) -> str:
        if self.kind == self.Kind.CORRECTIONS:
            text = gettext("%(contract)s corrections %(number)s")
        else:
            text = gettext("%(contract)s period %(number)s")
        return text % {"contract": self.contract, "number": self.period_index + 1}

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValidationError(_("A closed statement is never rewritten."))
        super().save(*args, **kwargs)

    @property
    def upfront_fee_rows(self) -> int:
        """Rows the page gives the upfront fee: one on the first statement, else none."""
        return 1 if self.upfront_fee else 0

    @property
    def shared_lines(self) -> list:
        """Its lent and borrowed lines (none, and no query, outside a group)."""
        if self.standalone_overage_cost is None:
            return []
        return list(self.sharing_lines.all())

    @property
    def page_rows(self) -> int:
        """Rows the page's statement table gives it under its heading."""
        shared = len(self.shared_lines) + 1 if self.standalone_overage_cost is not None else 0
        return (len(self.corrections.all()) + 3 + self.upfront_fee_rows + shared
                + (1 if self.credit else 0))

    @property
    def sharing_saving(self) -> Decimal:
        """What sharing saved this period (0 outside a group)."""
        if self.standalone_overage_cost is None:
            return Decimal(0)
        return self.standalone_overage_cost - self.overage_cost - self.shared_cost

    @property
    def number(self) -> int:
        """The period's number as people read it (1 is the first)."""
        return self.period_index + 1

    @property
    def period(self) -> billing.Period:
        return billing.Period(self.period_index, self.period_start, self.period_end)


class CorrectionLine(models.Model):
    """A correction a statement carries for an earlier, closed period: the period re-priced
    with its own terms (loans.maths.billing.Correction). Two figures print on it, each rate x
    GPU-hours to the cent: the overage billed before and the overage now; the amount is their
    difference. Written with its statement; never updated."""

    statement = models.ForeignKey(
        Statement, verbose_name=_("statement"), on_delete=models.PROTECT,
        related_name="corrections",
    )
    corrected = models.ForeignKey(
        Statement, verbose_name=_("statement corrected"), on_delete=models.PROTECT,
        related_name="corrected_by", help_text=_("The statement of the period corrected."),
    )
    period_index = models.PositiveSmallIntegerField(_("period corrected"))
    gpu_hours = models.DecimalField(_("change in GPU-hours"), max_digits=16, decimal_places=6)
    billed_gpu_hours = models.DecimalField(
        _("GPU-hours billed before"), max_digits=16, decimal_places=6)
    committed_gpu_hours = models.DecimalField(
        _("committed GPU-hours"), max_digits=16, decimal_places=6,
    )
    overage_rate = models.DecimalField(_("overage rate"), max_digits=12, decimal_places=4)
    overage_before_gpu_hours = models.DecimalField(
        _("overage GPU-hours before"), max_digits=16, decimal_places=6,
    )
    overage_after_gpu_hours = models.DecimalField(
        _("overage GPU-hours after"), max_digits=16, decimal_places=6,
    )
    overage_before_cost = models.DecimalField(
        _("overage cost before"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
    )
    overage_after_cost = models.DecimalField(
        _("overage cost after"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
    )
    sharing_before_cost = models.DecimalField(
        _("sharing before"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
        default=Decimal(0), help_text=_("In a sharing group: the period's sharing billed "
                                        "before (borrowed less lent)."))
    sharing_after_cost = models.DecimalField(
        _("sharing after"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
        default=Decimal(0), help_text=_("In a sharing group: the period's sharing re-run at "
                                        "the usage the meter holds now."))
    credit_before_cost = models.DecimalField(
        _("credit before"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
        default=Decimal(0), help_text=_("The period's service credit billed before."))
    credit_after_cost = models.DecimalField(
        _("credit after"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES,
        default=Decimal(0), help_text=_("The period's service credit at the waits the "
                                        "schedulers have reported since."))
    amount = models.DecimalField(_("amount"), max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES)

    class Meta:
        ordering = ["statement", "period_index"]
        verbose_name = _("correction")
        verbose_name_plural = _("corrections")
        constraints = [
            models.CheckConstraint(
                condition=adds_up("amount", F("overage_after_cost") - F("overage_before_cost")
                                  + F("sharing_after_cost") - F("sharing_before_cost")
                                  + F("credit_after_cost") - F("credit_before_cost")),
                name="correction_amount_adds_up"),
            models.UniqueConstraint(fields=["statement", "period_index"],
                                    name="correction_once_per_statement_and_period"),
        ]

    def __str__(self) -> str:
        return gettext("%(statement)s: period %(number)s %(amount)s") % {
            "statement": self.statement, "number": self.period_index + 1,
            "amount": f"{self.amount:+,.2f}"}

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValidationError(_("A closed statement is never rewritten."))
        super().save(*args, **kwargs)

    @property
    def billed_after_gpu_hours(self) -> Decimal:
        return self.billed_gpu_hours + self.gpu_hours

    @property
    def overage_change_gpu_hours(self) -> Decimal:
        """The overage GPU-hours the amount prices: the change in overage, not in usage (hours
        that stay under the commitment cost nothing)."""
        return self.overage_after_gpu_hours - self.overage_before_gpu_hours
