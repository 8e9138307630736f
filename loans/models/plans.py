"""The plan catalogue. Every rule that makes a plan impossible is a database constraint with a
message, so the admin, the API and a stray shell session all meet the same wall."""

from decimal import Decimal

from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from loans.maths import billing
from loans.models.fields import (
    MAX_HOURS_PER_PERIOD,
    MAX_TERM_MONTHS,
    currency_validator,
    default_currency,
    non_negative,
    tiers_validator,
    whole_minor_units,
)


class Plan(models.Model):
    """A catalogue offer: the quotas, the monthly commitment and its prices."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.TextField(_("description"), blank=True)
    gpu_model = models.CharField(
        _("GPU model"), max_length=100, blank=True, help_text=_("Empty: any model.")
    )
    base_quota_gpus = models.PositiveIntegerField(_("base quota (GPUs)"))
    max_quota_gpus = models.PositiveIntegerField(_("max quota (GPUs)"))
    committed_gpu_hours = models.DecimalField(
        _("committed GPU-hours per period"), max_digits=12, decimal_places=2,
        validators=non_negative(),
    )
    committed_rate = models.DecimalField(
        _("committed rate per GPU-hour"), max_digits=12, decimal_places=4,
        validators=non_negative(),
    )
    overage_rate = models.DecimalField(
        _("overage rate per GPU-hour"), max_digits=12, decimal_places=4, null=True, blank=True,
        validators=non_negative(),
        help_text=_("Empty: the committed rate times the overage multiplier."),
    )
    overage_multiplier = models.DecimalField(
        _("overage multiplier"), max_digits=5, decimal_places=3,
        default=billing.DEFAULT_OVERAGE_MULTIPLIER,
        help_text=_("Applies only where no overage rate is given: the overage rate is then the "
                    "committed rate times it."),
    )
    term_months = models.PositiveSmallIntegerField(_("term (months)"), default=12)
    guarantee_pct = models.DecimalField(
        _("guarantee level (%)"), max_digits=5, decimal_places=2, default=Decimal(100)
    )
    credit_tiers = models.CharField(
        _("service credits"), max_length=200, blank=True, validators=[tiers_validator],
        help_text=_("Availability below a level credits a percent of the period's committed "
                    "cost: 95:10, 90:25 (below 95%: 10%; below 90%: 25%). Empty: none."))
    upfront_fee = models.DecimalField(
        _("upfront fee"), max_digits=16, decimal_places=4, default=Decimal(0),
        validators=non_negative(),
    )
    currency = models.CharField(
        _("currency"), max_length=3, default=default_currency, validators=[currency_validator]
    )
    is_offered = models.BooleanField(_("offered"), default=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("plan")
        verbose_name_plural = _("plans")
        constraints = [
            models.CheckConstraint(
                condition=Q(max_quota_gpus__gte=F("base_quota_gpus")),
                name="plan_max_quota_at_least_base",
                violation_error_message=_("The max quota cannot be below the base quota."),
            ),
            models.CheckConstraint(
                condition=Q(max_quota_gpus__gte=1),
                name="plan_max_quota_positive",
                violation_error_message=_("The max quota must allow at least one GPU."),
            ),
            models.CheckConstraint(
                condition=Q(committed_gpu_hours__gte=0)
                & Q(committed_gpu_hours__lte=F("max_quota_gpus") * MAX_HOURS_PER_PERIOD),
                name="plan_commitment_reachable",
                violation_error_message=_(
                    "The committed GPU-hours must be between 0 and what the max quota can use "
                    "in a 31-day period (max quota x 744)."
                ),
            ),
            models.CheckConstraint(
                condition=Q(committed_rate__gte=0) & Q(upfront_fee__gte=0),
                name="plan_prices_not_negative",
                violation_error_message=_("Rates and fees cannot be negative."),
            ),
            models.CheckConstraint(
                condition=Q(overage_rate__isnull=True)
                | Q(overage_rate__gte=F("committed_rate")),
                name="plan_overage_rate_at_least_committed",
                violation_error_message=_("The overage rate cannot be below the committed rate."),
            ),
            models.CheckConstraint(
                condition=Q(overage_multiplier__gte=1),
                name="plan_overage_multiplier_at_least_one",
                violation_error_message=_("The overage multiplier must be at least 1."),
            ),
            models.CheckConstraint(
                condition=Q(term_months__gte=1) & Q(term_months__lte=MAX_TERM_MONTHS),
                name="plan_term_in_range",
                violation_error_message=_("The term must be between 1 and 120 months."),
            ),
            models.CheckConstraint(
                condition=Q(guarantee_pct__gte=0) & Q(guarantee_pct__lte=100),
                name="plan_guarantee_is_a_percentage",
                violation_error_message=_("The guarantee level must be between 0 and 100%%."),
            ),
            models.CheckConstraint(
                condition=Q(currency__regex=r"^[A-Z]{3}$"),
                name="plan_currency_iso",
                violation_error_message=_("Use a three-letter ISO 4217 currency code."),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        whole_minor_units(self.upfront_fee, self.currency, "upfront_fee")

    def effective_overage_rate(self) -> Decimal:
        return billing.overage_rate(self.committed_rate, self.overage_rate,
                                    self.overage_multiplier)

