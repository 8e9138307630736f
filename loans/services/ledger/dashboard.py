"""Reads what the dashboard and its API show: the contract a tenant page opens on, one period's
figures, the whole contract period by period. Usage comes from metering's hourly rollups only;
the raw samples are never read here."""

from datetime import date, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Case, IntegerField, Value, When
from django.utils.translation import gettext as _

from core import bounds
from loans.maths import billing
from loans.maths.burndown import TRAILING_WINDOW, trailing_window
from loans.maths.figures import PeriodFigures, PeriodGlance, period_figures, period_glance
from loans.maths.forecast import CALIBRATION
from loans.models import Contract, Tenant
from loans.services.ledger import forecasting
from loans.services.ledger import read as ledgers
from metering import usage


def contracts_of(tenant: Tenant) -> list[Contract]:
    """The tenant's contracts that have figures to show, the active ones first."""
    order = Case(When(status=Contract.Status.ACTIVE, then=Value(0)), default=Value(1),
                 output_field=IntegerField())
    return list(
        tenant.contracts.select_related("plan", "tenant").prefetch_related("amendments")
        .exclude(status__in=[Contract.Status.DRAFT, Contract.Status.CANCELLED])
        .order_by(order, "-starts_on")
    )


def started_periods(contract: Contract, now: datetime) -> list[billing.Period]:
    return [p for p in contract.periods() if p.start <= now]


def figures(contract: Contract, period: billing.Period, now: datetime,
            entry: ledgers.PeriodEntry | None = None) -> PeriodFigures:
    """One period's figures, priced with the terms in force at its start, at the usage the
    ledger reads for it (its entry, when the caller has read the ledger); the weeks before it
    feed the forecast where the contract ran."""
    hours = usage.tenant_hours(contract.tenant_id, _history_start(contract, period),
                         min(now, period.end))
    if entry is None:
        entry = ledgers.period_entry(contract, period, now)
    return _figures(contract, period, now, entry, hours)


def glances_of(pairs: list[tuple[Contract, billing.Period]], now: datetime
               ) -> dict[int, PeriodGlance]:
    """What figures() says of many contracts' periods, without the curves (the fleet page),
    keyed by contract id: two sums a contract, each period so far and the week before now,
    in one query whatever their number."""
    spans = []
    for contract, period in pairs:
        seen = min(now, period.end)
        week_start, _hours = trailing_window(seen, contract.periods()[0].start)
        spans.append((contract.tenant_id, period.start, week_start, seen))
    out = {}
    for (contract, period), (metered, week) in zip(pairs, usage.nested_totals(spans),
                                                   strict=True):
        entry = ledgers.live_entry(contract, period, now, metered)
        out[contract.pk] = period_glance(
            period=period, terms=entry.terms, now=now,
            history_start=contract.periods()[0].start, metered=(entry.metered, entry.busy),
            used=metered.allocated_gpu_hours, trailing=week.allocated_gpu_hours)
    return out


def _history_start(contract: Contract, period: billing.Period) -> datetime:
    """Where the hours a period's figures read start: the trailing week and the forecast's
    calibration (loans.maths.forecast) reach back before the period, never before the
    contract."""
    return max(contract.periods()[0].start, period.start - max(TRAILING_WINDOW, CALIBRATION))


def _figures(contract, period, now, entry, hours: list[usage.Hour]) -> PeriodFigures:
    return period_figures(
        period=period, terms=entry.terms, usage=hours, now=now,
        history_start=contract.periods()[0].start, metered=(entry.metered, entry.busy),
        prior=forecasting.fleet_prior(now), coverage=forecasting.measured_coverage(),
    )


class PeriodChoiceError(ValueError):
    """A `period` parameter that names no started period; the message says what would."""


WHOLE_CONTRACT = "all"


def started_period(contract: Contract, value: str | None, now: datetime) -> billing.Period:
    """The started period a `period` parameter names (pick_period without "all"); a contract
    whose first period has not begun answers PeriodChoiceError too."""
    period = pick_period(contract, value, now)
    if period is None:
        raise PeriodChoiceError(_("This contract's first period has not started yet."))
    return period


def pick_period(
    contract: Contract, value: str | None, now: datetime, *, allow_all: bool = False
) -> billing.Period | str | None:
    """Read a `period` parameter: empty for the current period, its number (1 is the first),
    a local date inside it (YYYY-MM-DD), or "all" for the whole contract where allowed."""
    started = started_periods(contract, now)
    value = (value or "").strip()
    if not value or value == "current":
        return started[-1] if started else None
    if value == WHOLE_CONTRACT and allow_all:
        return WHOLE_CONTRACT
    if value.isdigit() and len(value) <= 4:
        number = int(value)
        if 1 <= number <= len(started):
            return started[number - 1]
        raise PeriodChoiceError(
            _("Period %(number)s has not started; this contract has periods 1 to %(last)s so far.")
            % {"number": number, "last": len(started)} if started else
            _("This contract's first period has not started yet."))
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise PeriodChoiceError(
            _("period must be a period number, a date (YYYY-MM-DD) or \"current\"%(all)s; "
              "got %(value)s.") % {"all": _(" or \"all\"") if allow_all else "",
                                  "value": repr(value[:32])}) from None
    if not bounds.day_in_range(day):
        raise PeriodChoiceError(
            _("period must be a date from %(first)s to %(last)s; got %(day)s.")
            % {"first": bounds.FIRST_DAY, "last": bounds.LAST_DAY, "day": day})
    moment = billing.local_midnight(day, contract.zone)
    period = next((p for p in started if p.contains(moment)), None)
    if period is None:
        raise PeriodChoiceError(
            _("%(day)s is in no period of this contract that has started.") % {"day": day})
    return period


HEATMAP_CACHE_SECONDS = 24 * 3600


def gpu_days(contract: Contract, period: billing.Period, now: datetime) -> list[usage.GpuDay]:
    """The heatmap's cells: each GPU's usage per local day of the period so far.

    A day that ended before the late-data grace no longer changes, so its cells are cached
    (a big tenant's month is hundreds of thousands of GPU-hour rows); the days after it are
    read live. Data later than the grace shows once the cached day expires.
    """
    zone, end = contract.zone, min(period.end, now)
    days = usage.local_days(period.start, end, zone)
    settled = now - timedelta(hours=settings.LATE_DATA_GRACE_HOURS)
    bounds = [first for _day, first in days[1:]] + [end]
    closed = [(day, first, last) for (day, first), last in zip(days, bounds, strict=True)
              if last <= settled and last != end]
    keys = {day: f"gpu-days:{contract.tenant_id}:{zone.key}:{day.isoformat()}"
            for day, _first, _last in closed}
    cached = cache.get_many(list(keys.values()))
    missing = [(day, first, last) for day, first, last in closed if keys[day] not in cached]
    cells = [cell for key in keys.values() if key in cached for cell in cached[key]]
    if missing:
        fresh = usage.tenant_gpu_days(contract.tenant_id, missing[0][1], missing[-1][2], zone)
        wanted = {day for day, _first, _last in missing}
        by_day: dict = {day: [] for day in wanted}
        for cell in fresh:
            if cell.day in wanted:
                by_day[cell.day].append(cell)
        cache.set_many({keys[day]: value for day, value in by_day.items()},
                       HEATMAP_CACHE_SECONDS)
        cells += [cell for value in by_day.values() for cell in value]
    live_from = closed[-1][2] if closed else period.start
    if live_from < end:
        cells += usage.tenant_gpu_days(contract.tenant_id, live_from, end, zone)
    return cells
