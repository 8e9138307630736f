"""Contracts: a tenant signed to a plan. What spans two tables (overrides against the plan,
overlapping contracts) is checked in clean() and, for overlaps, by the database too
(migration 0002)."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from loans import billing
from loans.models.fields import (
    MAX_HOURS_PER_PERIOD,
    MAX_TERM_MONTHS,
    default_time_zone,
    non_negative,
    validate_time_zone,
)
from loans.models.plans import Plan
from loans.models.tenants import Tenant


@dataclass(frozen=True)
class Terms:
    """A contract's effective numbers: its negotiated overrides, else its plan's."""

    base_quota_gpus: int
    max_quota_gpus: int
    committed_gpu_hours: Decimal
    committed_rate: Decimal
    overage_rate: Decimal
    term_months: int
    currency: str


class Contract(models.Model):
    """A tenant signed to a plan from a start date; may override the plan's numbers."""

    class Status(models.TextChoices):
        DRAFT = "draft", _("draft")
        ACTIVE = "active", _("active")
        ENDED = "ended", _("ended")
        CANCELLED = "cancelled", _("cancelled")

    OVERRIDES = (
        "base_quota_gpus",
        "max_quota_gpus",
        "committed_gpu_hours",
        "committed_rate",
        "overage_rate",
        "overage_multiplier",
        "term_months",
    )

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="contracts")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="contracts")
    starts_on = models.DateField(_("starts on"))
    ends_on = models.DateField(
        _("ends on"), editable=False, help_text=_("The start date plus the term.")
    )
    time_zone = models.CharField(
        _("time zone"), max_length=64, default=default_time_zone,
        validators=[validate_time_zone],
        help_text=_("Periods start at local midnight in this zone."),
    )
    status = models.CharField(
        _("status"), max_length=10, choices=Status.choices, default=Status.DRAFT
    )
    base_quota_gpus = models.PositiveIntegerField(_("base quota (GPUs)"), null=True, blank=True)
    max_quota_gpus = models.PositiveIntegerField(_("max quota (GPUs)"), null=True, blank=True)
    committed_gpu_hours = models.DecimalField(
        _("committed GPU-hours per period"), max_digits=12, decimal_places=2, null=True,
        blank=True, validators=non_negative(),
    )
    committed_rate = models.DecimalField(
        _("committed rate per GPU-hour"), max_digits=12, decimal_places=4, null=True,
        blank=True, validators=non_negative(),
    )
    overage_rate = models.DecimalField(
        _("overage rate per GPU-hour"), max_digits=12, decimal_places=4, null=True, blank=True,
        validators=non_negative(),
    )
    overage_multiplier = models.DecimalField(
        _("overage multiplier"), max_digits=5, decimal_places=3, null=True, blank=True
    )
    term_months = models.PositiveSmallIntegerField(_("term (months)"), null=True, blank=True)
    notes = models.TextField(_("notes"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "-starts_on"]
        verbose_name = _("contract")
        verbose_name_plural = _("contracts")
        indexes = [models.Index(fields=["tenant", "status"], name="contract_tenant_status")]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_quota_gpus__isnull=True)
                | Q(base_quota_gpus__isnull=True)
                | Q(max_quota_gpus__gte=F("base_quota_gpus")),
                name="contract_max_quota_at_least_base",
                violation_error_message=_("The max quota cannot be below the base quota."),
            ),
            models.CheckConstraint(
                condition=(Q(committed_gpu_hours__isnull=True) | Q(committed_gpu_hours__gte=0))
                & (Q(committed_rate__isnull=True) | Q(committed_rate__gte=0))
                & (Q(overage_rate__isnull=True) | Q(overage_rate__gte=0)),
                name="contract_numbers_not_negative",
                violation_error_message=_("Committed GPU-hours and rates cannot be negative."),
            ),
            models.CheckConstraint(
                condition=Q(overage_multiplier__isnull=True) | Q(overage_multiplier__gte=1),
                name="contract_overage_multiplier_at_least_one",
                violation_error_message=_("The overage multiplier must be at least 1."),
            ),
            models.CheckConstraint(
                condition=Q(term_months__isnull=True)
                | (Q(term_months__gte=1) & Q(term_months__lte=MAX_TERM_MONTHS)),
                name="contract_term_in_range",
                violation_error_message=_("The term must be between 1 and 120 months."),
            ),
            models.CheckConstraint(
                condition=Q(ends_on__gt=F("starts_on")),
                name="contract_ends_after_start",
                violation_error_message=_("A contract must end after it starts."),
            ),
            models.CheckConstraint(
                condition=Q(status__in=["draft", "active", "ended", "cancelled"]),
                name="contract_status_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug} / {self.plan.name} from {self.starts_on}"

    def save(self, *args, **kwargs) -> None:
        if self.starts_on and self.plan_id:
            self.ends_on = billing.add_months(self.starts_on, self.terms().term_months)
        super().save(*args, **kwargs)

    def terms(self) -> Terms:
        plan = self.plan

        def pick(name: str):
            value = getattr(self, name)
            return getattr(plan, name) if value is None else value

        committed_rate = pick("committed_rate")
        # An explicit overage rate on either side wins over a multiplier; the contract's own
        # numbers win over the plan's.
        if self.overage_rate is not None:
            rate = self.overage_rate
        elif self.overage_multiplier is not None:
            rate = billing.overage_rate(committed_rate, None, self.overage_multiplier)
        else:
            rate = billing.overage_rate(committed_rate, plan.overage_rate, plan.overage_multiplier)
        return Terms(
            base_quota_gpus=pick("base_quota_gpus"),
            max_quota_gpus=pick("max_quota_gpus"),
            committed_gpu_hours=pick("committed_gpu_hours"),
            committed_rate=committed_rate,
            overage_rate=rate,
            term_months=pick("term_months"),
            currency=plan.currency,
        )

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def periods(self) -> list[billing.Period]:
        return billing.periods(self.starts_on, self.terms().term_months, self.zone)

    def period_at(self, ts: datetime) -> billing.Period | None:
        return billing.period_at(self.starts_on, self.terms().term_months, self.zone, ts)

    def clean(self) -> None:
        """The checks that span the plan and other contracts, with messages for operators."""
        if not self.plan_id or not self.starts_on:
            return
        terms = self.terms()
        self.ends_on = billing.add_months(self.starts_on, terms.term_months)
        errors: dict[str, list] = {}
        if terms.max_quota_gpus < terms.base_quota_gpus:
            errors.setdefault("max_quota_gpus", []).append(
                _("The max quota (%(max)s) cannot be below the base quota (%(base)s).")
                % {"max": terms.max_quota_gpus, "base": terms.base_quota_gpus}
            )
        if terms.committed_gpu_hours > terms.max_quota_gpus * MAX_HOURS_PER_PERIOD:
            errors.setdefault("committed_gpu_hours", []).append(
                _("%(hours)s GPU-hours can never be used with a max quota of %(max)s GPUs.")
                % {"hours": terms.committed_gpu_hours, "max": terms.max_quota_gpus}
            )
        if terms.overage_rate < terms.committed_rate:
            errors.setdefault("overage_rate", []).append(
                _("The overage rate cannot be below the committed rate.")
            )
        if "time_zone" not in errors and self._time_zone_is_valid():
            misaligned = [p.start for p in self.periods() if not billing.hour_aligned(p.start)]
            if misaligned:
                errors.setdefault("time_zone", []).append(
                    _(
                        "Periods in %(zone)s would start off the hour in UTC (%(when)s); "
                        "usage is metered by the UTC hour, so choose a zone with a whole-hour "
                        "offset."
                    )
                    % {"zone": self.time_zone, "when": misaligned[0].isoformat()}
                )
        if self.status == self.Status.ACTIVE and self.tenant_id:
            clash = self.overlapping_active().first()
            if clash:
                errors.setdefault("starts_on", []).append(
                    _("%(tenant)s already has an active contract from %(start)s to %(end)s.")
                    % {"tenant": self.tenant, "start": clash.starts_on, "end": clash.ends_on}
                )
        if errors:
            raise ValidationError(errors)

    def _time_zone_is_valid(self) -> bool:
        try:
            validate_time_zone(self.time_zone)
        except ValidationError:
            return False
        return True

    def overlapping_active(self) -> models.QuerySet:
        return Contract.objects.filter(
            tenant_id=self.tenant_id,
            status=self.Status.ACTIVE,
            starts_on__lt=self.ends_on,
            ends_on__gt=self.starts_on,
        ).exclude(pk=self.pk)
