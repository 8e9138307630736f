"""Billing periods, a contract's terms and the money of a period: pure functions over plain
values, no ORM.

Money is Decimal, rounded half-up to the currency's minor unit per line, so that the lines of a
statement add up to its total. GPU-hours enter pricing rounded to 1e-6 GPU-h, the precision the
meter guarantees; rates are kept to 1e-4, the precision they are stored with, so the rate a
line prints is the rate it was charged at and rate x GPU-hours, rounded to the cent, is the
line's amount.
"""

import calendar
import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from babel.numbers import get_currency_precision

GPU_HOURS = Decimal("0.000001")
RATE = Decimal("0.0001")
DEFAULT_OVERAGE_MULTIPLIER = Decimal("1.2")
ZERO = Decimal(0)


@dataclass(frozen=True)
class Period:
    """One billing month of a contract: [start, end) in UTC, numbered from 0."""

    index: int
    start: datetime
    end: datetime

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600

    def contains(self, ts: datetime) -> bool:
        return self.start <= ts < self.end

    def local_dates(self, tz: ZoneInfo) -> tuple[date, date]:
        """The first and the last day of the period on the contract's calendar."""
        return (self.start.astimezone(tz).date(),
                (self.end - timedelta(microseconds=1)).astimezone(tz).date())


def add_months(day: date, months: int) -> date:
    """The anniversary of `day` `months` later, clamped to the month's end (Jan 31 -> Feb 28)."""
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    """The first instant of `day` in `tz`, in UTC.

    Where a DST gap swallows midnight (clocks jump 00:00 -> 01:00), fold=0 resolves the missing
    wall time with the offset in force before the jump, which lands exactly on the transition:
    the first instant the day exists. Where midnight repeats, fold=0 is the earlier one.
    """
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


def periods(starts_on: date, term_months: int, tz: ZoneInfo) -> list[Period]:
    """Every period of a contract: anniversary months from `starts_on`, local midnight in `tz`.

    Each anniversary is taken from the start date, not chained, so a contract starting on the 31st
    has periods starting Jan 31, Feb 28, Mar 31.
    """
    return list(_periods(starts_on, term_months, tz))


@functools.lru_cache(maxsize=4096)
def _periods(starts_on: date, term_months: int, tz: ZoneInfo) -> tuple[Period, ...]:
    # Pure in its arguments and asked for again and again (every page reads each contract's
    # periods several times; the fleet reads a thousand contracts'): computed once each.
    bounds = [local_midnight(add_months(starts_on, k), tz) for k in range(term_months + 1)]
    return tuple(Period(k, bounds[k], bounds[k + 1]) for k in range(term_months))


def period_of(starts_on: date, index: int, tz: ZoneInfo) -> Period:
    """The `index`-th anniversary month from `starts_on`, inside the term or after it (the
    months after a contract's end on which its final corrections are stated)."""
    return Period(index, local_midnight(add_months(starts_on, index), tz),
                  local_midnight(add_months(starts_on, index + 1), tz))


def period_at(starts_on: date, term_months: int, tz: ZoneInfo, ts: datetime) -> Period | None:
    """The period that contains `ts`, or None before the start or after the term."""
    return next((p for p in periods(starts_on, term_months, tz) if p.contains(ts)), None)


def hour_aligned(moment: datetime) -> bool:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0) == moment


def rate(value: Decimal) -> Decimal:
    """A rate per GPU-hour as it is stored and charged: to 1e-4, half-up."""
    return Decimal(value).quantize(RATE, rounding=ROUND_HALF_UP)


def overage_rate(
    committed_rate: Decimal, explicit: Decimal | None, multiplier: Decimal | None
) -> Decimal:
    """The rate above the commitment: the explicit one, else committed rate x multiplier,
    rounded to the stored precision (2.3457 x 1.2 is charged as 2.8148, not 2.81484)."""
    if explicit is not None:
        return rate(explicit)
    return rate(committed_rate
                * (multiplier if multiplier is not None else DEFAULT_OVERAGE_MULTIPLIER))


@dataclass(frozen=True)
class Terms:
    """What a contract's period is priced and sized with: the numbers copied from the plan at
    signing, with negotiated overrides and the amendments in force at the period's start."""

    base_quota_gpus: int
    max_quota_gpus: int
    committed_gpu_hours: Decimal
    committed_rate: Decimal
    overage_rate: Decimal
    term_months: int
    currency: str
    upfront_fee: Decimal = Decimal(0)
    gpu_model: str = ""
    guarantee_pct: Decimal = Decimal(100)  # the floor: the base quota there this % of the time
    credit_tiers: str = ""  # service credits below levels of it: "95:10, 90:25" (guarantee)

    def cost(self, used: Decimal) -> "PeriodCost":
        """A period's cost under these terms when `used` GPU-hours were allocated."""
        return period_cost(committed=self.committed_gpu_hours, used=used,
                           committed_rate=self.committed_rate, overage_rate=self.overage_rate,
                           currency=self.currency)


@functools.cache
def minor_unit(currency: str) -> Decimal:
    """The smallest amount of `currency`, from the Unicode CLDR's currency data (through
    Babel, which keeps it): 0.01 CNY, 1 JPY, 0.001 KWD. A code CLDR does not know has two."""
    return Decimal(1).scaleb(-get_currency_precision(currency))


def money(amount: Decimal, currency: str) -> Decimal:
    """`amount` rounded half-up to the currency's minor unit."""
    return amount.quantize(minor_unit(currency), rounding=ROUND_HALF_UP)


def gpu_hours(value: Decimal | float | int) -> Decimal:
    """GPU-hours as the meter guarantees them: Decimal, to 1e-6 GPU-h."""
    if isinstance(value, float):
        value = Decimal(repr(value))
    return Decimal(value).quantize(GPU_HOURS, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class PeriodCost:
    committed_gpu_hours: Decimal
    used_gpu_hours: Decimal
    overage_gpu_hours: Decimal
    unused_gpu_hours: Decimal
    committed_cost: Decimal
    overage_cost: Decimal
    total: Decimal


def period_cost(
    *, committed: Decimal, used: Decimal, committed_rate: Decimal, overage_rate: Decimal,
    currency: str,
) -> PeriodCost:
    """Cost of a period: C * r_c + max(0, U - C) * r_o, each line rounded to the currency's
    minor unit."""
    committed, used = gpu_hours(committed), gpu_hours(used)
    if committed < 0 or used < 0 or committed_rate < 0 or overage_rate < 0:
        raise ValueError("GPU-hours and rates cannot be negative")
    overage = max(ZERO, used - committed)
    committed_cost = money(committed * committed_rate, currency)
    overage_cost = money(overage * overage_rate, currency)
    return PeriodCost(
        committed_gpu_hours=committed,
        used_gpu_hours=used,
        overage_gpu_hours=overage,
        unused_gpu_hours=unused(committed, used),
        committed_cost=committed_cost,
        overage_cost=overage_cost,
        total=committed_cost + overage_cost,
    )


@dataclass(frozen=True)
class Correction:
    """What a closed period owes (or is owed) because its usage changed after its statement:
    the period re-priced with its own terms. The committed part of a period does not depend on
    usage, so only the overage line moves: the amount is the overage cost at the new usage less
    the overage cost billed, each of them rate x GPU-hours to the cent. Negative when usage was
    taken away (re-attributed to another tenant)."""

    gpu_hours: Decimal  # the change in allocated GPU-hours
    billed_gpu_hours: Decimal  # allocated GPU-hours billed for the period before this line
    committed_gpu_hours: Decimal
    overage_rate: Decimal
    overage_before_gpu_hours: Decimal
    overage_after_gpu_hours: Decimal
    overage_before_cost: Decimal
    overage_after_cost: Decimal
    # In a sharing group: the period's sharing (borrowed less lent) billed before and re-run.
    sharing_before_cost: Decimal = ZERO
    sharing_after_cost: Decimal = ZERO
    # The period's service credit (negative) billed before, and at the waits known now.
    credit_before_cost: Decimal = ZERO
    credit_after_cost: Decimal = ZERO

    @property
    def amount(self) -> Decimal:
        return (self.overage_after_cost - self.overage_before_cost
                + self.sharing_after_cost - self.sharing_before_cost
                + self.credit_after_cost - self.credit_before_cost)

    @property
    def billed_after_gpu_hours(self) -> Decimal:
        return self.billed_gpu_hours + self.gpu_hours


def correction(terms: Terms, *, billed: Decimal, metered: Decimal, billed_credit: Decimal = ZERO,
               credit: Decimal = ZERO) -> Correction | None:
    """correction = cost(metered) - cost(billed) under the period's terms, with the change in
    its service credit; None when the meter agrees with what was billed (to 1e-6 GPU-h) and
    the credit is unchanged."""
    billed, metered = gpu_hours(billed), gpu_hours(metered)
    if billed == metered and billed_credit == credit:
        return None
    before, after = terms.cost(billed), terms.cost(metered)
    return shared_correction(
        terms, billed=Billed(billed, before.overage_gpu_hours, before.overage_cost,
                             credit=billed_credit),
        metered=metered, overage_gpu_hours=after.overage_gpu_hours,
        overage_cost=after.overage_cost, sharing=ZERO, credit=credit)


@dataclass(frozen=True)
class Billed:
    """What a closed period has been billed so far, over its statement and corrections."""

    gpu_hours: Decimal
    overage_gpu_hours: Decimal
    overage_cost: Decimal
    sharing: Decimal = ZERO  # borrowed less lent, in a sharing group
    credit: Decimal = ZERO  # the service credit (negative)


def shared_correction(terms: Terms, *, billed: Billed, metered: Decimal,
                      overage_gpu_hours: Decimal, overage_cost: Decimal, sharing: Decimal,
                      credit: Decimal | None = None) -> Correction | None:
    """A period stated in a sharing group, re-run at the usage the meter holds now (its own
    and its partners'): the difference in its overage, its sharing and its credit (`credit`:
    the credit now; None: as billed), as money; None when none of them changed."""
    metered = gpu_hours(metered)
    credit = billed.credit if credit is None else credit
    if (metered == billed.gpu_hours and overage_cost == billed.overage_cost
            and sharing == billed.sharing and credit == billed.credit):
        return None
    return Correction(
        gpu_hours=metered - billed.gpu_hours, billed_gpu_hours=billed.gpu_hours,
        committed_gpu_hours=gpu_hours(terms.committed_gpu_hours),
        overage_rate=terms.overage_rate,
        overage_before_gpu_hours=billed.overage_gpu_hours,
        overage_after_gpu_hours=overage_gpu_hours, overage_before_cost=billed.overage_cost,
        overage_after_cost=overage_cost, sharing_before_cost=billed.sharing,
        sharing_after_cost=sharing, credit_before_cost=billed.credit,
        credit_after_cost=credit)


def service_credit(committed_cost: Decimal, percent: Decimal, currency: str) -> Decimal:
    """The credit a period's availability earned: `percent` of its committed cost, to the
    currency's minor unit, as a negative line (0 when nothing is credited)."""
    if percent <= 0:
        return ZERO
    return -money(committed_cost * percent / 100, currency)


def utilisation(committed: Decimal, used: Decimal) -> Decimal | None:
    """Share of the commitment used, min(U, C) / C; None without a commitment."""
    if committed <= 0:
        return None
    return min(used, committed) / committed


def unused(committed: Decimal, used: Decimal) -> Decimal:
    return max(ZERO, committed - used)


def hours_between(start: datetime, end: datetime) -> list[datetime]:
    """The UTC hour starts in [start, end), start rounded down to the hour."""
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    out = []
    while hour < end:
        out.append(hour)
        hour += timedelta(hours=1)
    return out
