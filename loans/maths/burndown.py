"""The burn-down of a period: committed GPU-hours remaining over time, the ideal straight line and
a forecast from the trailing 7-day rate with a P10-P90 band calibrated on the fleet's forecast
errors at the team's own scale (loans.maths.forecast). Pure: plain floats and datetimes.

GPU-hours here feed charts and projections, so they are floats; money is priced elsewhere
(loans.maths.billing) from the meter's exact figures.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from loans.maths import forecast
from loans.maths.billing import hours_between

HOUR = timedelta(hours=1)
TRAILING_WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class BurnDown:
    """Series over the period's points (every hour boundary, plus `now` when inside the period)."""

    points: list[datetime]
    ideal: list[float]
    remaining: list[float | None]  # actual, up to now
    forecast: list[float | None]  # expected, from now on
    forecast_p10: list[float | None]  # 10% chance of ending lower (the P90 of usage)
    forecast_p90: list[float | None]  # 10% chance of ending higher (the P10 of usage)
    committed: float
    used: float
    rate_per_hour: float
    projected_used: float
    projected_exhaustion: datetime | None
    # When the commitment runs out at the band's P90 of usage and at its P10 (None: not in
    # the period); both None where it ran out already or will not at either.
    exhaustion_range: tuple[datetime | None, datetime | None]
    spread: forecast.Spread  # the band's calibration (loans.maths.forecast)

    @property
    def projected_overage(self) -> float:
        return max(0.0, self.projected_used - self.committed)

    @property
    def projected_unused(self) -> float:
        return max(0.0, self.committed - self.projected_used)


def trailing_rate(
    usage: dict[datetime, float], now: datetime, history_start: datetime | None = None
) -> float:
    """Mean hourly usage over the 7 days before `now` (or since `history_start`, if later): the
    point forecast of every hour left."""
    start, window_hours = trailing_window(now, history_start)
    if window_hours <= 0:
        return 0.0
    total = sum(v for hour, v in usage.items() if start <= hour < now)
    return mean_rate(total, window_hours)


def trailing_window(now: datetime, history_start: datetime | None = None
                    ) -> tuple[datetime, float]:
    """The window the trailing rate averages over, ending at `now`: its start (7 days before,
    or `history_start` if later) and its length in hours. Hours that start in [start, now)
    count."""
    start = now - TRAILING_WINDOW
    if history_start is not None and history_start > start:
        start = history_start
    return start, (now - start).total_seconds() / 3600


def mean_rate(total: float, window_hours: float) -> float:
    """GPU-hours per hour: `total` over the window's hours (trailing_window)."""
    return total / window_hours if window_hours > 0 else 0.0


def projected_use(*, start: datetime, end: datetime, now: datetime, used: float,
                  per_hour: float) -> float:
    """GPU-hours the period [start, end) ends with, seen at `now`: those used so far, plus
    `per_hour` (the trailing rate) for every hour left. The one forecast of a period's use:
    the burn-down's and the fleet's."""
    return used + per_hour * max(0.0, (end - max(now, start)).total_seconds() / 3600)


def burndown(
    *,
    start: datetime,
    end: datetime,
    committed: float,
    usage: dict[datetime, float],
    now: datetime,
    history_start: datetime | None = None,
    prior: forecast.Spread | None = None,
) -> BurnDown:
    """Burn-down of the period [start, end) as seen at `now`.

    `usage` maps UTC hour starts to allocated GPU-hours; hours before `start` are history for the
    trailing rate and the band's calibration only. Hours at or after `now` are ignored: they
    have not happened. `prior`: the fleet's band (loans.maths.forecast.pooled; the bench's
    PRIOR when None), drawn at the team's own scale.
    """
    points = hours_between(start, end) + [end]
    if start < now < end and now not in points:
        points = sorted([*points, now])
    total_hours = (end - start).total_seconds() / 3600

    # Remaining at a point counts the hours that started before it (and before now): one pass
    # over the period's hours keeps the series linear in its length.
    used_by: dict[datetime, float] = {}
    cumulative = 0.0
    for hour in hours_between(start, end):
        used_by[hour] = cumulative
        if hour < now:
            cumulative += usage.get(hour, 0.0)
    used_by[end] = cumulative
    used = cumulative
    used_by.setdefault(now, cumulative)

    remaining_now = committed - used
    seen = min(now, end)
    per_hour = trailing_rate(usage, seen, history_start or start)
    spread = forecast.spread_of(forecast.daily_totals(usage, seen, history_start or start),
                                prior)
    projected_used = projected_use(start=start, end=end, now=now, used=used,
                                   per_hour=per_hour)

    exhausted = _exhaustion(start, end, committed, usage, now, per_hour)
    ideal, remaining, expected, low, high = [], [], [], [], []
    for point in points:
        elapsed = (point - start).total_seconds() / 3600
        ideal.append(committed * (1 - elapsed / total_hours))
        if point <= now:
            remaining.append(committed - used_by[point])
        else:
            remaining.append(None)
        if point >= now:
            ahead = (point - max(now, start)).total_seconds() / 3600
            least, most = spread.band(per_hour, ahead)
            expected.append(remaining_now - per_hour * ahead)
            low.append(remaining_now - most)
            high.append(remaining_now - least)
        else:
            expected.append(None)
            low.append(None)
            high.append(None)

    return BurnDown(
        points=points,
        ideal=ideal,
        remaining=remaining,
        forecast=expected,
        forecast_p10=low,
        forecast_p90=high,
        committed=committed,
        used=used,
        rate_per_hour=per_hour,
        projected_used=projected_used,
        projected_exhaustion=exhausted,
        exhaustion_range=(_range(points, now, low, high) if remaining_now > 0
                          else (exhausted, exhausted)),
        spread=spread,
    )


def _exhaustion(
    start: datetime,
    end: datetime,
    committed: float,
    usage: dict[datetime, float],
    now: datetime,
    rate: float,
) -> datetime | None:
    """When the commitment runs out: the hour it did, or when the trailing rate says it will."""
    cumulative = 0.0
    for hour in hours_between(start, min(now, end)):
        before = cumulative
        cumulative += usage.get(hour, 0.0)
        if cumulative >= committed and cumulative > 0:
            share = (committed - before) / (cumulative - before)
            return hour + share * HOUR
    if now >= end or rate <= 0:
        return None
    from_ = max(now, start)
    hours_left = (committed - cumulative) / rate
    if hours_left >= (end - from_).total_seconds() / 3600:
        return None
    return from_ + hours_left * HOUR


def _range(points: list[datetime], now: datetime, low: list, high: list
           ) -> tuple[datetime | None, datetime | None]:
    """The first points, from now on, where the band's low and high edges of the remaining
    commitment reach zero: the commitment runs out between them."""
    def first(series):
        return next((p for p, v in zip(points, series, strict=True)
                     if p > now and v is not None and v <= 0), None)
    return first(low), first(high)
