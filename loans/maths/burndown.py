"""The burn-down of a period: committed GPU-hours remaining over time, the ideal straight line and
a forecast from the trailing 7-day rate with a P10-P90 band. Pure: plain floats and datetimes.

GPU-hours here feed charts and projections, so they are floats; money is priced elsewhere
(loans.maths.billing) from the meter's exact figures.
"""

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from loans.maths.billing import hours_between

HOUR = timedelta(hours=1)
TRAILING_WINDOW = timedelta(days=7)
Z90 = 1.2815515655446004  # standard normal quantile at 0.9: P10/P90 = mean -/+ Z90 * sd


@dataclass(frozen=True)
class Rate:
    """Usage per hour over the trailing window, and the spread of a sum over `h` future hours."""

    per_hour: float
    block_hours: int
    block_sd: float

    def spread(self, horizon_hours: float) -> float:
        if horizon_hours <= 0 or self.block_hours == 0:
            return 0.0
        return Z90 * self.block_sd * math.sqrt(horizon_hours / self.block_hours)


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

    @property
    def projected_overage(self) -> float:
        return max(0.0, self.projected_used - self.committed)

    @property
    def projected_unused(self) -> float:
        return max(0.0, self.committed - self.projected_used)


def trailing_rate(
    usage: dict[datetime, float], now: datetime, history_start: datetime | None = None
) -> Rate:
    """Mean hourly usage over the 7 days before `now` (or since `history_start`, if later).

    The spread comes from whole-day sums where at least two whole days are in the window, so
    the day/night rhythm does not pass for noise; otherwise from hourly values.
    """
    start, window_hours = trailing_window(now, history_start)
    if window_hours <= 0:
        return Rate(0.0, 0, 0.0)
    days = int(window_hours // 24)
    block_hours, count = (24, days) if days >= 2 else (1, int(window_hours))
    # One pass over the usage, in its own order (the sums add the same values in the same
    # order as a sum per block would, so the result is the same to the last bit).
    total = 0
    blocks = [0] * count
    block = block_hours * 3600
    for hour, v in usage.items():
        if start <= hour < now:
            total += v
        ago = (now - hour).total_seconds()
        if 0 < ago <= count * block:
            # Block k holds the hours in [now - (k + 1) blocks, now - k blocks).
            for k in _near(math.ceil(ago / block) - 1, count):
                if now - (k + 1) * block_hours * HOUR <= hour < now - k * block_hours * HOUR:
                    blocks[k] += v
                    break
    per_hour = mean_rate(total, window_hours)
    block_sd = statistics.stdev(blocks) if len(blocks) >= 2 else 0.0
    return Rate(per_hour, block_hours if len(blocks) >= 2 else 0, block_sd)


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


def _near(k: int, count: int) -> list[int]:
    """k first, then its neighbours, within [0, count): guards the float division above."""
    return [j for j in (k, k - 1, k + 1) if 0 <= j < count]


def burndown(
    *,
    start: datetime,
    end: datetime,
    committed: float,
    usage: dict[datetime, float],
    now: datetime,
    history_start: datetime | None = None,
) -> BurnDown:
    """Burn-down of the period [start, end) as seen at `now`.

    `usage` maps UTC hour starts to allocated GPU-hours; hours before `start` are history for the
    trailing rate only. Hours at or after `now` are ignored: they have not happened.
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
    rate = trailing_rate(usage, min(now, end), history_start or start)
    projected_used = projected_use(start=start, end=end, now=now, used=used,
                                   per_hour=rate.per_hour)

    ideal, remaining, forecast, low, high = [], [], [], [], []
    for point in points:
        elapsed = (point - start).total_seconds() / 3600
        ideal.append(committed * (1 - elapsed / total_hours))
        if point <= now:
            remaining.append(committed - used_by[point])
        else:
            remaining.append(None)
        if point >= now:
            ahead = (point - max(now, start)).total_seconds() / 3600
            expected = rate.per_hour * ahead
            spread = rate.spread(ahead)
            forecast.append(remaining_now - expected)
            low.append(remaining_now - expected - spread)
            high.append(remaining_now - max(0.0, expected - spread))
        else:
            forecast.append(None)
            low.append(None)
            high.append(None)

    return BurnDown(
        points=points,
        ideal=ideal,
        remaining=remaining,
        forecast=forecast,
        forecast_p10=low,
        forecast_p90=high,
        committed=committed,
        used=used,
        rate_per_hour=rate.per_hour,
        projected_used=projected_used,
        projected_exhaustion=_exhaustion(start, end, committed, usage, now, rate.per_hour),
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
