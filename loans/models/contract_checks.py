"""What clean() checks of a contract: its terms against each other, what its history forbids,
its zone's period starts, and the tenant's other contracts (overlaps and near misses). A mixin
of Contract (loans.models.contracts), apart from its fields and terms."""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from loans.maths import billing
from loans.models.fields import MAX_HOURS_PER_PERIOD, validate_time_zone, whole_minor_units


class ContractChecks:
    """clean() and the queries it asks; the fields, terms and statuses are Contract's."""

    def clean(self) -> None:
        """The checks that span the plan, the contract's history and other contracts, with
        messages for operators."""
        if not self.plan_id or not self.starts_on:
            return
        if self.status in self.HOLDING and not self.is_signed:
            self.sign()  # activating signs: the checks below see the terms it fixes
        errors: dict[str, list] = {}

        def refuse(field: str, message) -> None:
            errors.setdefault(field, []).append(message)

        for name in self.changed_signed_terms():
            refuse(name, _("Signed terms change only by an amendment, from a period that has "
                           "not begun."))
        terms = self.signed_terms() if self.is_signed else self.draft_terms()
        if terms.max_quota_gpus < terms.base_quota_gpus:
            refuse("max_quota_gpus",
                   _("The max quota (%(max)s) cannot be below the base quota (%(base)s).")
                   % {"max": terms.max_quota_gpus, "base": terms.base_quota_gpus})
        if terms.committed_gpu_hours > terms.max_quota_gpus * MAX_HOURS_PER_PERIOD:
            refuse("committed_gpu_hours",
                   _("%(hours)s GPU-hours can never be used with a max quota of %(max)s GPUs.")
                   % {"hours": terms.committed_gpu_hours, "max": terms.max_quota_gpus})
        if terms.overage_rate < terms.committed_rate:
            refuse("overage_rate", _("The overage rate cannot be below the committed rate."))
        try:
            whole_minor_units(self.upfront_fee, terms.currency, "upfront_fee")
        except ValidationError as error:
            refuse("upfront_fee", error.message_dict["upfront_fee"][0])
        self._clean_history(refuse)
        if "time_zone" not in errors and self._time_zone_is_valid():
            self._place()
            periods = self.periods()
            # Each period's start and the last one's end: a zone whose offset has a half hour
            # for part of the year may start on the hour and end off it.
            edges = [p.start for p in periods] + [periods[-1].end] if periods else []
            misaligned = [edge for edge in edges if not billing.hour_aligned(edge)]
            if misaligned:
                refuse("time_zone", _(
                    "Periods in %(zone)s would start or end off the hour in UTC (%(when)s); "
                    "usage is metered by the UTC hour, so choose a zone with a whole-hour "
                    "offset.")
                    % {"zone": self.time_zone, "when": misaligned[0].isoformat()})
            elif self.status in self.HOLDING and self.tenant_id:
                clash = self.overlapping().first()
                if clash:
                    refuse("starts_on", _(
                        "%(tenant)s already has a contract in force from %(start)s to %(end)s "
                        "(UTC); two contracts of one tenant never overlap.")
                        % {"tenant": self.tenant, "start": f"{clash.window_start:%Y-%m-%d %H:%M}",
                           "end": f"{clash.window_end:%Y-%m-%d %H:%M}"})
        if errors:
            raise ValidationError(errors)

    def _clean_history(self, refuse) -> None:
        """What the contract's past forbids: status changes, and moving a stated contract."""
        before = self.stored("status")
        if before is None or not self.pk:
            return
        stated = self.statements.exists()
        if stated:
            for name in self.STATED:
                if differ(getattr(self, name), self.stored(name)):
                    refuse(name, _("The start, time zone and term of a contract cannot change "
                                   "once it has a statement; to end it early, terminate it."))
        now = timezone.now()
        status, S = self.status, self.Status
        if before == status:
            return
        if before in (S.ENDED, S.CANCELLED):
            refuse("status", _("An ended or cancelled contract cannot be reopened; sign a new "
                               "one."))
        elif before == S.ACTIVE and status == S.DRAFT:
            refuse("status", _("A signed contract cannot go back to draft."))
        elif before == S.ACTIVE and status == S.ENDED and now < self.window_end:
            refuse("status", _("This contract is in force until %(end)s; to end it early, "
                               "terminate it: it ends at the end of its current period.")
                   % {"end": self.window_end.isoformat()})
        elif before == S.ACTIVE and status == S.CANCELLED and (stated or now >= self.window_start):
            refuse("status", _("A contract that has started cannot be cancelled; terminate it "
                               "instead."))

    def _time_zone_is_valid(self) -> bool:
        try:
            validate_time_zone(self.time_zone)
        except ValidationError:
            return False
        return True

    def near_misses(self) -> list[tuple[models.Model, float]]:
        """The tenant's contracts that end less than a day before this one starts, or start
        less than a day after it ends, with the hours between them: hours no contract covers,
        billed by neither (back-to-back contracts in different zones leave such gaps)."""
        day = 24 * 3600
        out = []
        for other in type(self).objects.filter(tenant_id=self.tenant_id, status__in=self.HOLDING
                                             ).exclude(pk=self.pk):
            gap = max((self.window_start - other.window_end).total_seconds(),
                      (other.window_start - self.window_end).total_seconds())
            if 0 < gap < day:
                out.append((other, gap / 3600))
        return out

    def overlapping(self) -> models.QuerySet:
        """The tenant's other contracts in force at some instant of this one's window."""
        return type(self).objects.filter(
            tenant_id=self.tenant_id,
            status__in=self.HOLDING,
            window_start__lt=self.window_end,
            window_end__gt=self.window_start,
        ).exclude(pk=self.pk)


def differ(new, old) -> bool:
    """Stored and current values compare as numbers where they are (10 == 10.0000)."""
    if isinstance(new, Decimal | int) and isinstance(old, Decimal | int):
        return Decimal(new) != Decimal(old)
    return new != old
