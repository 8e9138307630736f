"""The figures a team lead reads for one period: used against committed, cost so far and at
period end, the burn-down and the series behind the charts. Pure: hourly usage in, figures out.

The dashboard page and the burn-down API both render a `PeriodFigures`, so they cannot
disagree; money comes from the period's terms (billing.Terms.cost), the one money rule.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from loans.maths import billing
from loans.maths.burndown import (
    BurnDown,
    burndown,
    mean_rate,
    projected_use,
    trailing_window,
)
from loans.maths.forecast import Coverage, Spread, bucket

DAY = timedelta(days=1)


class Hourly(Protocol):
    """One UTC hour of a tenant's usage, as the meter rolled it up: what the figures read of
    an hour. The meter's own hours (metering.usage.Hour) are passed as they are."""

    hour: datetime
    allocated_gpu_hours: float
    busy_gpu_hours: float
    peak_gpus: float


@dataclass(frozen=True)
class HourUsage:
    """An hour of usage made by hand (the tests, the demo's stories), for callers without a
    meter."""

    hour: datetime
    allocated_gpu_hours: float
    busy_gpu_hours: float
    peak_gpus: float


@dataclass(frozen=True)
class PeriodGlance:
    """What the fleet reads of a period: used against committed, cost so far and at period
    end. PeriodFigures adds the burn-down and the hours behind the charts."""

    period: billing.Period
    now: datetime
    terms: billing.Terms  # in force at the period's start
    used_gpu_hours: Decimal
    busy_gpu_hours: Decimal
    cost_so_far: billing.PeriodCost
    projected_used_gpu_hours: Decimal
    projected_cost: billing.PeriodCost

    @property
    def committed_gpu_hours(self) -> Decimal:
        return self.terms.committed_gpu_hours

    @property
    def remaining_gpu_hours(self) -> Decimal:
        """Committed GPU-hours not used yet; negative once the period is in overage."""
        return self.committed_gpu_hours - self.used_gpu_hours

    @property
    def utilisation(self) -> Decimal | None:
        return billing.utilisation(self.committed_gpu_hours, self.used_gpu_hours)

    @property
    def used_share(self) -> Decimal | None:
        """Used over committed, past 100% in overage (utilisation stops at 100%)."""
        c = self.committed_gpu_hours
        return self.used_gpu_hours / c if c > 0 else None

    @property
    def unused_money(self) -> Decimal:
        """What the committed GPU-hours not used (so far; final once the period ended) cost."""
        return billing.money(self.cost_so_far.unused_gpu_hours * self.terms.committed_rate,
                             self.terms.currency)

    @property
    def projected_unused_money(self) -> Decimal:
        """What the committed GPU-hours the forecast says will go unused cost: paid, not used."""
        return billing.money(self.projected_unused_gpu_hours * self.terms.committed_rate,
                             self.terms.currency)

    @property
    def busy_share(self) -> Decimal | None:
        """Busy over allocated: how much of the paid-for time did work."""
        if self.used_gpu_hours <= 0:
            return None
        return self.busy_gpu_hours / self.used_gpu_hours

    @property
    def state(self) -> str:
        if self.now >= self.period.end:
            return "ended"
        return "open" if self.now >= self.period.start else "upcoming"

    @property
    def days_left(self) -> float:
        left = self.period.end - max(self.now, self.period.start)
        return max(0.0, left / DAY)

    @property
    def projected_overage_gpu_hours(self) -> Decimal:
        return self.projected_cost.overage_gpu_hours

    @property
    def projected_unused_gpu_hours(self) -> Decimal:
        return self.projected_cost.unused_gpu_hours


@dataclass(frozen=True)
class PeriodFigures(PeriodGlance):
    burndown: BurnDown
    hours: Sequence[Hourly]  # the period's hours up to now
    # How often the band held on the fleet's own past at this many days left (None: not
    # measured yet; loans.services.ledger.forecasting).
    coverage: Coverage | None = None

    @property
    def projected_exhaustion(self) -> datetime | None:
        return self.burndown.projected_exhaustion

    @property
    def exhaustion_range(self) -> tuple[datetime | None, datetime | None]:
        return self.burndown.exhaustion_range

    @property
    def projected_band(self) -> tuple[float, float] | None:
        """P10 and P90 of the GPU-hours the period ends with (None once it ended)."""
        curve = self.burndown
        low, high = curve.forecast_p90[-1], curve.forecast_p10[-1]
        if low is None or high is None:
            return None
        return curve.committed - low, curve.committed - high

    @property
    def coverage_in_ten(self) -> int | None:
        """The band's coverage measured on the fleet's past, as times in ten (None: the fleet
        is too young to measure it)."""
        return self.coverage.in_ten if self.coverage else None

    def cumulative(self) -> tuple[list[float], list[float]]:
        """Running totals of allocated and busy GPU-hours at the end of each hour."""
        allocated, busy, a, b = [], [], 0.0, 0.0
        for hour in self.hours:
            a += hour.allocated_gpu_hours
            b += hour.busy_gpu_hours
            allocated.append(a)
            busy.append(b)
        return allocated, busy


def period_figures(
    *,
    period: billing.Period,
    terms: billing.Terms,
    usage: Sequence[Hourly],
    now: datetime,
    history_start: datetime | None = None,
    metered: tuple[Decimal, Decimal] | None = None,
    prior: Spread | None = None,
    coverage: dict[str, Coverage] | None = None,
) -> PeriodFigures:
    """Figures of `period` as seen at `now` from hourly usage; hours before the period (from
    `history_start` on, e.g. the contract's start) feed the forecast's trailing rate only.
    `metered` is the period's (allocated, busy) GPU-hours as the ledger reads them, so the
    money here is the ledger's to the cent; without it they are summed from `usage`.
    `coverage`: the band's coverage measured on the fleet's past, by horizon bucket."""
    by_hour = {h.hour: h.allocated_gpu_hours for h in usage if h.hour < now}
    in_period = [h for h in usage if period.start <= h.hour < min(now, period.end)]
    if metered is None:
        metered = (billing.gpu_hours(sum(h.allocated_gpu_hours for h in in_period)),
                   billing.gpu_hours(sum(h.busy_gpu_hours for h in in_period)))
    used, busy = metered
    curve = burndown(
        start=period.start,
        end=period.end,
        committed=float(terms.committed_gpu_hours),
        usage=by_hour,
        now=now,
        history_start=history_start,
        prior=prior,
    )
    left = max(0.0, (period.end - max(now, period.start)).total_seconds() / 86400)
    return PeriodFigures(**_glance(period, terms, now, metered, curve.projected_used),
                         burndown=curve, hours=in_period,
                         coverage=(coverage or {}).get(bucket(left)))


def period_glance(
    *,
    period: billing.Period,
    terms: billing.Terms,
    now: datetime,
    history_start: datetime,
    metered: tuple[Decimal, Decimal],
    used: float,
    trailing: float,
) -> PeriodGlance:
    """period_figures without the curves, from sums (the fleet's thousand periods): `used`
    GPU-hours in the period so far and `trailing` in the window trailing_window gives at
    min(now, period end) from `history_start`, as the burn-down would have summed them."""
    seen = min(now, period.end)
    _start, window_hours = trailing_window(seen, history_start)
    projected = projected_use(start=period.start, end=period.end, now=now, used=used,
                              per_hour=mean_rate(trailing, window_hours))
    return PeriodGlance(**_glance(period, terms, now, metered, projected))


def _glance(period, terms, now, metered, projected_used: float) -> dict:
    used, busy = metered
    projected = max(used, billing.gpu_hours(projected_used))
    return {"period": period, "now": now, "terms": terms, "used_gpu_hours": used,
            "busy_gpu_hours": busy, "cost_so_far": terms.cost(used),
            "projected_used_gpu_hours": projected, "projected_cost": terms.cost(projected)}
