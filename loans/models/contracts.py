"""Contracts: a tenant signed to a plan. What spans two tables (overrides against the plan,
overlapping contracts) is checked in clean() and by the database too (migrations 0002, 0008).

A contract's terms are the plan's numbers copied at signing (activation), with the negotiated
overrides; editing the plan later changes only contracts signed afterwards. A signed contract's
numbers change only by an amendment (loans.models.Amendment), in force from the start of a
period that has not begun; its start, time zone and term are fixed once it has a statement,
except that early termination ends it at the end of its current period.
"""

from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core import audit
from loans.maths import billing, guarantee
from loans.maths.billing import Terms
from loans.models.contract_checks import ContractChecks, differ
from loans.models.fields import (
    MAX_TERM_MONTHS,
    currency_validator,
    default_time_zone,
    non_negative,
    tiers_validator,
    validate_time_zone,
)
from loans.models.plans import Plan
from loans.models.tenants import Tenant

__all__ = ["Contract", "Terms"]


class Contract(ContractChecks, models.Model):
    """A tenant signed to a plan from a start date, over an interval of instants."""

    class Status(models.TextChoices):
        DRAFT = "draft", _("draft")
        ACTIVE = "active", _("active")
        ENDED = "ended", _("ended")
        CANCELLED = "cancelled", _("cancelled")

    # Negotiated before signing; at signing every one left empty takes the plan's number.
    OVERRIDES = (
        "base_quota_gpus",
        "max_quota_gpus",
        "committed_gpu_hours",
        "committed_rate",
        "overage_rate",
        "overage_multiplier",
        "term_months",
        "upfront_fee",
        "guarantee_pct",
        "credit_tiers",
    )
    # What signing fixes: the contract's own numbers from then on, whatever the plan becomes,
    # and whose contract it is, of which plan.
    SIGNED = (
        "tenant", "plan", "base_quota_gpus", "max_quota_gpus", "committed_gpu_hours",
        "committed_rate", "overage_rate", "overage_multiplier", "upfront_fee", "currency",
        "gpu_model", "guarantee_pct", "credit_tiers", "signed_at",
    )
    # What an amendment may change, from a period that has not begun.
    AMENDABLE = (
        "base_quota_gpus", "max_quota_gpus", "committed_gpu_hours", "committed_rate",
        "overage_rate", "guarantee_pct", "credit_tiers",
    )
    # Fixed once a statement exists (the term may still be shortened by termination).
    STATED = ("starts_on", "time_zone", "term_months")
    # Statuses whose contracts hold their instants: two of one tenant never overlap.
    HOLDING = ("active", "ended")

    tenant = models.ForeignKey(
        Tenant, verbose_name=_("tenant"), on_delete=models.PROTECT, related_name="contracts",
    )
    plan = models.ForeignKey(
        Plan, verbose_name=_("plan"), on_delete=models.PROTECT, related_name="contracts",
    )
    starts_on = models.DateField(_("starts on"))
    ends_on = models.DateField(
        _("ends on"), editable=False,
        help_text=_("The start date plus the term: the contract ends at local midnight."),
    )
    time_zone = models.CharField(
        _("time zone"), max_length=64, default=default_time_zone,
        validators=[validate_time_zone],
        help_text=_("Periods start at local midnight in this zone."),
    )
    window_start = models.DateTimeField(_("in force from"), editable=False)
    window_end = models.DateTimeField(_("in force until"), editable=False)
    status = models.CharField(
        _("status"), max_length=10, choices=Status.choices, default=Status.DRAFT
    )
    signed_at = models.DateTimeField(_("signed"), null=True, blank=True, editable=False)
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
    upfront_fee = models.DecimalField(
        _("upfront fee"), max_digits=16, decimal_places=4, null=True, blank=True,
        validators=non_negative(),
    )
    currency = models.CharField(
        _("currency"), max_length=3, blank=True, validators=[currency_validator],
        help_text=_("Copied from the plan at signing."),
    )
    guarantee_pct = models.DecimalField(
        _("guarantee level (%)"), max_digits=5, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text=_("Empty: the plan's. The base quota is there when asked for this share of "
                    "the time."))
    credit_tiers = models.CharField(  # noqa: DJ001 - NULL: the plan's; "": no credits
        _("service credits"), max_length=200, null=True, blank=True,
        validators=[tiers_validator],
        help_text=_("Empty: the plan's. Availability below a level credits a percent of the "
                    "period's committed cost: 95:10, 90:25."))
    gpu_model = models.CharField(
        _("GPU model"), max_length=100, blank=True,
        help_text=_("Copied from the plan at signing; empty: any model."),
    )
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
                & (Q(overage_rate__isnull=True) | Q(overage_rate__gte=0))
                & (Q(upfront_fee__isnull=True) | Q(upfront_fee__gte=0)),
                name="contract_numbers_not_negative",
                violation_error_message=_(
                    "Committed GPU-hours, rates and fees cannot be negative."),
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
                condition=Q(window_end__gt=F("window_start")),
                name="contract_window_forward",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["draft", "active", "ended", "cancelled"]),
                name="contract_status_known",
            ),
            # A contract holding instants has signed terms of its own.
            models.CheckConstraint(
                condition=~Q(status__in=["active", "ended"])
                | (Q(signed_at__isnull=False) & Q(base_quota_gpus__isnull=False)
                   & Q(max_quota_gpus__isnull=False) & Q(committed_gpu_hours__isnull=False)
                   & Q(committed_rate__isnull=False) & Q(overage_rate__isnull=False)
                   & Q(term_months__isnull=False) & Q(upfront_fee__isnull=False)
                   & ~Q(currency="")),
                name="contract_signed_terms_complete",
            ),
        ]

    def __str__(self) -> str:
        return gettext("%(tenant)s / %(plan)s from %(start)s") % {
            "tenant": self.tenant.slug, "plan": self.plan.name, "start": self.starts_on}

    def save(self, *args, **kwargs) -> None:
        if self.status in self.HOLDING and not self.is_signed:
            self.sign()
        changed = self.changed_signed_terms()
        if changed:
            raise ValidationError({name: _("Signed terms change only by an amendment.")
                                   for name in changed})
        self._place()
        cancelled = (self.status == self.Status.CANCELLED
                     and self.stored("status") != self.Status.CANCELLED)
        super().save(*args, **kwargs)
        if cancelled:
            # A contract cancelled before its start lends nothing: its sharing memberships are
            # kept, marked void (DESIGN "Sharing a commitment").
            now = timezone.now()
            voided = list(self.sharing.filter(voided_at__isnull=True))
            self.sharing.filter(pk__in=[m.pk for m in voided]).update(voided_at=now)
            for member in voided:
                audit.changed(member, {"voided_at": None}, {"voided_at": now},
                              tenant=self.tenant_id)
        self._remember_stored()

    @classmethod
    def from_db(cls, db, field_names, values):
        contract = super().from_db(db, field_names, values)
        contract._stored = dict(zip(field_names, values, strict=True))
        return contract

    def _remember_stored(self) -> None:
        self._stored = {f.attname: getattr(self, f.attname) for f in self._meta.concrete_fields}

    def stored(self, name: str):
        """The value of `name` as last read from or written to the database (None if new)."""
        return getattr(self, "_stored", {}).get(name)

    @property
    def is_signed(self) -> bool:
        return self.signed_at is not None

    def sign(self, now: datetime | None = None) -> None:
        """Copy the plan's numbers into every term the contract does not override. From now on
        the contract's own numbers are its terms, whatever happens to the plan."""
        terms = self.draft_terms()
        self.base_quota_gpus = terms.base_quota_gpus
        self.max_quota_gpus = terms.max_quota_gpus
        self.committed_gpu_hours = terms.committed_gpu_hours
        self.committed_rate = terms.committed_rate
        self.overage_rate = terms.overage_rate
        self.term_months = terms.term_months
        self.upfront_fee = terms.upfront_fee
        self.currency = terms.currency
        self.gpu_model = terms.gpu_model
        self.guarantee_pct = terms.guarantee_pct
        self.credit_tiers = terms.credit_tiers
        self.signed_at = now or timezone.now()

    def _place(self) -> None:
        """ends_on and the window of instants, from the start date, the zone and the term."""
        if not (self.starts_on and self.plan_id and self._time_zone_is_valid()):
            return
        self.ends_on = billing.add_months(self.starts_on, self.term_count())
        self.window_start = billing.local_midnight(self.starts_on, self.zone)
        self.window_end = billing.local_midnight(self.ends_on, self.zone)

    def changed_signed_terms(self) -> list[str]:
        """The signed terms this instance would change in the database."""
        if not hasattr(self, "_stored") or self.stored("signed_at") is None:
            return []
        return [name for name in self.SIGNED
                if differ(getattr(self, _attname(self, name)),
                          self.stored(_attname(self, name)))]

    def term_count(self) -> int:
        """The number of periods: the contract's own term, else (before signing) the plan's."""
        return self.term_months if self.term_months is not None else self.plan.term_months

    def draft_terms(self) -> Terms:
        """The terms as they would be signed now: each override, else the plan's number."""
        plan = self.plan

        def pick(name: str):
            value = getattr(self, name)
            return getattr(plan, name) if value is None else value

        committed_rate = billing.rate(pick("committed_rate"))
        # An explicit overage rate on either side wins over a multiplier; the contract's own
        # numbers win over the plan's.
        if self.overage_rate is not None:
            overage = billing.rate(self.overage_rate)
        elif self.overage_multiplier is not None:
            overage = billing.overage_rate(committed_rate, None, self.overage_multiplier)
        else:
            overage = billing.overage_rate(committed_rate, plan.overage_rate,
                                           plan.overage_multiplier)
        return Terms(
            base_quota_gpus=pick("base_quota_gpus"),
            max_quota_gpus=pick("max_quota_gpus"),
            committed_gpu_hours=pick("committed_gpu_hours"),
            committed_rate=committed_rate,
            overage_rate=overage,
            term_months=pick("term_months"),
            currency=self.currency or plan.currency,
            upfront_fee=pick("upfront_fee"),
            gpu_model=self.gpu_model if self.is_signed else plan.gpu_model,
            guarantee_pct=Decimal(pick("guarantee_pct")),
            credit_tiers=guarantee.tiers_text(guarantee.parse_tiers(pick("credit_tiers"))),
        )

    def signed_terms(self) -> Terms:
        """The terms of the first period: the contract's own numbers once signed."""
        if not self.is_signed:
            return self.draft_terms()
        return Terms(
            base_quota_gpus=self.base_quota_gpus, max_quota_gpus=self.max_quota_gpus,
            committed_gpu_hours=Decimal(self.committed_gpu_hours),
            committed_rate=billing.rate(self.committed_rate),
            overage_rate=billing.rate(self.overage_rate), term_months=self.term_months,
            currency=self.currency, upfront_fee=Decimal(self.upfront_fee),
            gpu_model=self.gpu_model,
            guarantee_pct=Decimal(100 if self.guarantee_pct is None else self.guarantee_pct),
            credit_tiers=self.credit_tiers or "",
        )

    def amendments_in_order(self) -> list:
        """Amendments by the period they apply from, then as written (prefetch-friendly)."""
        if not self.pk:
            return []
        # Those with_amendments read, else the prefetched or stored ones.
        found = self.__dict__.get("_amendments_read")
        if found is None:
            found = self.amendments.all()
        return sorted(found, key=lambda a: (a.from_period, a.created_at, a.pk))

    def terms_for(self, index: int) -> Terms:
        """The terms in force at the start of period `index`: the signed ones, with every
        amendment from that period or earlier applied in order."""
        return self._terms_through(index)[-1]

    def terms_by_period(self) -> list[Terms]:
        """terms_for every period of the term, in one pass over the amendments."""
        return self._terms_through(self.term_count() - 1)

    def _terms_through(self, last: int) -> list[Terms]:
        # Read-only instances (with_amendments) work their terms out once.
        known = self.__dict__.get("_terms_read")
        if known is not None and 0 <= last < len(known):
            return known[:last + 1]
        if "_amendments_read" not in self.__dict__:
            return self._work_out_terms(last)
        out = self._work_out_terms(max(last, self.term_count() - 1))  # every period, once
        self._terms_read = out
        return out[:last + 1]

    def _work_out_terms(self, last: int) -> list[Terms]:
        count = self.term_count()
        terms = replace(self.signed_terms(), term_months=count)
        pending = self.amendments_in_order()
        out = [terms] if last < 0 else []
        for index in range(last + 1):
            if pending and pending[0].from_period <= index:
                while pending and pending[0].from_period <= index:
                    terms = pending.pop(0).apply_to(terms)
                terms = replace(terms, term_months=count)
            out.append(terms)
        return out

    def terms_at(self, moment: datetime) -> Terms:
        """The terms in force at `moment` (the first period's before the start, the last
        period's after the end)."""
        periods = self.periods()
        index = next((p.index for p in periods if p.contains(moment)),
                     0 if not periods or moment < periods[0].start else periods[-1].index)
        return self.terms_for(index)

    def terms(self) -> Terms:
        """The terms in force now."""
        return self.terms_at(timezone.now())

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def periods(self) -> list[billing.Period]:
        return billing.periods(self.starts_on, self.term_count(), self.zone)

    def period_at(self, ts: datetime) -> billing.Period | None:
        return billing.period_at(self.starts_on, self.term_count(), self.zone, ts)


def _attname(contract: Contract, name: str) -> str:
    return contract._meta.get_field(name).attname


def with_amendments(contracts: list[Contract]) -> list[Contract]:
    """`contracts`, each with its amendments as they are now, read in one query: for reading
    many contracts' terms (the fleet's thousand; prefetch_related clones a queryset for every
    contract, about 50 ms of the fleet page's time at 1,000 contracts). Read-only: an amendment
    written later is not seen by these instances."""
    amendment = Contract.amendments.rel.related_model
    found: dict[int, list] = {contract.pk: [] for contract in contracts}
    for row in amendment.objects.filter(contract__in=list(found)):
        found[row.contract_id].append(row)
    for contract in contracts:
        contract._amendments_read = found[contract.pk]
    return contracts
