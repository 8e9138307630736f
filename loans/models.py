"""Tenants, their members, the plan catalogue, contracts and statements.

Every rule that makes a plan or contract impossible is a database constraint with a message, so
the admin, the API and a stray shell session all meet the same wall. What spans two tables (a
contract's overrides against its plan, overlapping contracts) is checked in clean() and, for
overlaps, by the database too (migration 0002).
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from loans import billing

# A period can hold at most 31 days of the max quota; a commitment above that can never be met.
MAX_HOURS_PER_PERIOD = 31 * 24
MAX_TERM_MONTHS = 120

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    _("Use 1-50 lowercase letters, digits and hyphens, not starting or ending with a hyphen."),
)
currency_validator = RegexValidator(r"^[A-Z]{3}$", _("Use a three-letter ISO 4217 code, e.g. CNY."))


def default_currency() -> str:
    return settings.DEFAULT_CURRENCY


def default_time_zone() -> str:
    return settings.TIME_ZONE


def validate_time_zone(value: str) -> None:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            _("%(value)s is not an IANA time zone (e.g. Asia/Shanghai)."),
            params={"value": value},
        ) from None


def non_negative() -> list:
    return [MinValueValidator(0)]


class Tenant(models.Model):
    """A team that holds contracts; its members see only its own figures."""

    slug = models.CharField(_("slug"), max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(_("name"), max_length=200)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = _("tenant")
        verbose_name_plural = _("tenants")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        LEAD = "lead", _("lead")
        MEMBER = "member", _("member")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(_("role"), max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"],
                name="membership_once_per_tenant",
                violation_error_message=_("This user is already a member of this tenant."),
            ),
            models.CheckConstraint(
                condition=Q(role__in=["lead", "member"]), name="membership_role_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant.slug} ({self.role})"


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
    )
    term_months = models.PositiveSmallIntegerField(_("term (months)"), default=12)
    guarantee_pct = models.DecimalField(
        _("guarantee level (%)"), max_digits=5, decimal_places=2, default=Decimal(100)
    )
    upfront_fee = models.DecimalField(
        _("upfront fee"), max_digits=14, decimal_places=2, default=Decimal(0),
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


from loans.tokens import ApiToken  # noqa: E402, F401 - registers the model with this app
