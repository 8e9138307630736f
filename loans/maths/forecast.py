"""How sure the burn-down's forecast is: a P10-P90 band on the GPU-hours a period will still use,
calibrated on what the forecaster got wrong before, across the fleet. Pure: plain floats.

The point forecast is the trailing rate (loans.maths.burndown): the mean GPU-hours a day over
the 7 days before now (fewer for a team metered for fewer), for every day left.

The band is conformal: at every past midnight of every team (a rolling origin, from the team's
first metered day), the trailing mean m of the k <= 7 days before it was a forecast of the next
h days; its error is the log ratio log(used / (h x m)), divided by the team's scale at that
origin (`scale`: its days' coefficient of variation, never under SCALE_FLOOR). The fleet's
scaled errors at horizons near h (h / SPAN to h x SPAN days) give P10 and P90 of the score, and
a team's band at h days is h x m x exp(P x its own scale): multiplicative, so it never goes
below zero, and it is as wide as the team's own days vary. Because the quantiles are read off
the errors themselves, a few wild teams move them by their share of the errors only; a team
that idles a day is a large score, not a variance that widens everyone (the fit this replaced:
variance = iid x h + level x h^2 on mean squares).

Where the fleet has fewer than MIN_SCORES errors near a horizon (a young fleet, a long
horizon), PRIOR is used there: the same quantiles, measured by bench/forecast.py on its
synthetic young fleets and the demo's teams; past the fleet's longest measured horizon it is
stretched as the fleet's quantiles there stand to PRIOR's (within STRETCH), and widened by
BEYOND. A fleet of under MIN_TEAMS teams with errors gets PRIOR whole. A team's own errors
alone are not used: measured on the bench's seasoned fleet they held the period 63% of the
time at 16-29 days left, the fleet's scaled 85% (a team's last eight weeks seldom hold the
level shift its next month has).

The band's coverage is not a constant: `backtest` replays it on the fleet's own past, and a
daily job stores what it measured (loans.services.ledger.forecasting.measure_coverage).
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WEEK = 7  # days of the trailing mean, as loans.maths.burndown's
LONGEST = 31  # the longest horizon calibrated, in days
CALIBRATION = timedelta(days=56)  # the history the errors are taken from
SPAN = 1.5  # horizons within h / SPAN .. h x SPAN days calibrate horizon h
MIN_SCORES = 50  # errors near a horizon before the fleet's replace PRIOR there
SAMPLED = 2000  # the most errors a horizon's quantiles read
STRETCH = 3.0  # the most a young fleet's short horizons widen or narrow PRIOR's long ones
# Past the horizons a young fleet measured, its errors grow faster than PRIOR's (its level
# shifts are yet to come): measured on bench/forecast.py's young fleets, 1.1 x the stretched
# quantiles held 70% at 16-29 days left where 1.0 held 69%.
BEYOND = 1.1
MIN_TEAMS = 3  # teams with errors before the fleet's pool is used at all
SCALE_FLOOR = 0.1  # a team's scale is at least this (a near-constant team is not certain)
UNKNOWN_CV = 1.0  # the coefficient of variation of a team seen for under two days
SCALE_DAYS = 14  # the days a team's scale reads, back from the origin
IDLE = -20.0  # the log ratio of a horizon that used nothing (log 0)
BUCKETS = ((16, "16-29"), (8, "8-15"), (0, "<=7"))  # days left, at least


def bucket(days_left: float) -> str:
    """The horizon bucket (BUCKETS) a forecast with `days_left` days to go falls in."""
    return next(name for least, name in BUCKETS if days_left >= least)


@dataclass(frozen=True)
class Spread:
    """P10 and P90 of the scaled log error at horizons 1 .. LONGEST days (`low`, `high`), the
    team's `scale`, and where the quantiles came from: "fleet" or "prior"."""

    low: tuple[float, ...]
    high: tuple[float, ...]
    scale: float = 1.0
    source: str = "prior"

    @property
    def own(self) -> bool:
        """Calibrated on this fleet's errors (not the bench's PRIOR)."""
        return self.source == "fleet"

    def quantiles(self, days: float) -> tuple[float, float]:
        """The score's P10 and P90 `days` ahead: linear between whole days, the first day's
        under one, the longest's past it."""
        if days <= 1:
            return self.low[0], self.high[0]
        if days >= len(self.low):
            return self.low[-1], self.high[-1]
        k = int(days)
        share = days - k
        return (self.low[k - 1] * (1 - share) + self.low[k] * share,
                self.high[k - 1] * (1 - share) + self.high[k] * share)

    def band(self, per_hour: float, hours: float) -> tuple[float, float]:
        """P10 and P90 of the GPU-hours used over the next `hours` at the trailing rate
        `per_hour`: never below zero, none where the rate is none."""
        expected = per_hour * max(0.0, hours)
        if expected <= 0:
            return 0.0, 0.0
        low, high = self.quantiles(hours / 24)
        return expected * math.exp(low * self.scale), expected * math.exp(high * self.scale)

    def scaled(self, scale: float) -> "Spread":
        return Spread(self.low, self.high, scale, self.source)


# Measured by bench/forecast.py (`--fit`) on its training fleets and traces, as it prints it:
# P10 and P90 of the scaled log error at 1 .. LONGEST days.
PRIOR = Spread(
    low=(-15.471, -2.460, -1.982, -1.366, -1.196, -1.117, -1.040, -0.974, -0.962,
         -0.917, -0.893, -0.884, -0.868, -0.853, -0.851, -0.838, -0.828, -0.821, -0.813,
         -0.799, -0.796, -0.793, -0.790, -0.790, -0.786, -0.782, -0.782, -0.777, -0.772,
         -0.772, -0.766),
    high=(1.155, 0.977, 0.956, 0.900, 0.868, 0.841, 0.818, 0.798, 0.795, 0.786, 0.779,
          0.782, 0.780, 0.785, 0.788, 0.796, 0.802, 0.807, 0.812, 0.818, 0.820, 0.823,
          0.826, 0.826, 0.829, 0.833, 0.833, 0.836, 0.839, 0.839, 0.843))


def daily_totals(usage: dict[datetime, float], now: datetime, start: datetime | None
                 ) -> list[float]:
    """GPU-hours in each whole day (24 h) before `now`, oldest first: at most CALIBRATION's
    days, none that starts before `start`."""
    first = now - CALIBRATION
    if start is not None and start > first:
        first = start
    count = int((now - first).total_seconds() // 86400)
    totals = [0.0] * count
    for hour, value in usage.items():
        ago = (now - hour).total_seconds()
        if 0 < ago <= count * 86400:
            totals[count - 1 - int((ago - 1) // 86400)] += value
    return totals


def from_first_use(days: Sequence[float]) -> list[float]:
    """The days from the first that used anything: a team's history starts at its first
    metered hour, not at the window's start (the days before it are not a team idling)."""
    first = next((k for k, value in enumerate(days) if value > 0), len(days))
    return list(days[first:])


def scale(days: Sequence[float]) -> float:
    """The team's scale at the end of `days` (oldest first): the coefficient of variation of
    its last SCALE_DAYS days, UNKNOWN_CV under two, never under SCALE_FLOOR."""
    window = days[-SCALE_DAYS:]
    mean = sum(window) / len(window) if window else 0.0
    if len(window) < 2 or mean <= 0:
        cv = UNKNOWN_CV
    else:
        cv = math.sqrt(sum((v - mean) ** 2 for v in window) / len(window)) / mean
    return math.hypot(SCALE_FLOOR, cv)


def trailing_mean(days: Sequence[float]) -> float:
    """The mean of the last WEEK days (all of them where fewer): the forecast a day."""
    window = days[-WEEK:]
    return sum(window) / len(window) if window else 0.0


def scores(days: Sequence[float], until: int | None = None) -> Iterable[tuple[int, int, float]]:
    """(origin, horizon, scaled log error) at every origin of a team's days (from its first
    metered day, oldest first) with a day before it, for every horizon that ended by day
    `until` (all of `days` when None): origins whose trailing days used nothing are left out,
    there is no scale."""
    end = len(days) if until is None else min(until, len(days))
    prefix = [0.0]
    for value in days[:end]:
        prefix.append(prefix[-1] + value)
    for origin in range(1, end):
        k = min(origin, WEEK)
        mean = (prefix[origin] - prefix[origin - k]) / k
        if mean <= 0:
            continue
        spread = scale(days[:origin])
        for horizon in range(1, min(LONGEST, end - origin) + 1):
            used = prefix[origin + horizon] - prefix[origin]
            error = math.log(used / (horizon * mean)) if used > 0 else IDLE
            yield origin, horizon, error / spread


def table(found: Iterable[tuple[int, float]], fallback: Spread | None = None,
          least: int = MIN_SCORES) -> Spread:
    """P10 and P90 at each horizon from (horizon, score) pairs: the scores within SPAN of it,
    `fallback`'s (PRIOR when None) where fewer than `least`. Its source is "fleet" where any
    horizon is the fleet's."""
    fallback = fallback or PRIOR
    by_horizon: list[list[float]] = [[] for _ in range(LONGEST + 1)]
    for horizon, score in found:
        by_horizon[horizon].append(score)
    # A large fleet's quantiles from an even sample of each horizon's errors: the table costs
    # the same at a thousand teams as at a hundred.
    by_horizon = [values[::math.ceil(len(values) / SAMPLED)] if len(values) > SAMPLED
                  else values for values in by_horizon]
    measured: dict[int, tuple[float, float]] = {}
    for horizon in range(1, LONGEST + 1):
        near = sorted(v for h in range(1, LONGEST + 1) if horizon / SPAN <= h <= horizon * SPAN
                      for v in by_horizon[h])
        if len(near) >= least:
            measured[horizon] = (_quantile(near, 0.1), _quantile(near, 0.9))
    if not measured:
        return Spread(fallback.low, fallback.high, 1.0, fallback.source)
    # Past the longest horizon measured, the fallback's shape at the fleet's width there: a
    # young fleet has no month-long errors yet, but its week's say how wild it is.
    last = max(measured)
    stretch = (_ratio(measured[last][0], fallback.low[last - 1]),
               _ratio(measured[last][1], fallback.high[last - 1]))
    low, high = [], []
    for horizon in range(1, LONGEST + 1):
        if horizon in measured:
            low.append(measured[horizon][0])
            high.append(measured[horizon][1])
        elif horizon > last:
            low.append(fallback.low[horizon - 1] * stretch[0] * BEYOND)
            high.append(fallback.high[horizon - 1] * stretch[1] * BEYOND)
        else:
            low.append(fallback.low[horizon - 1])
            high.append(fallback.high[horizon - 1])
    return Spread(tuple(low), tuple(high), 1.0, "fleet")


def _ratio(measured: float, prior: float) -> float:
    """How much wider the fleet's quantile is than the fallback's at one horizon, within
    STRETCH; 1 where they are of different signs."""
    if measured * prior <= 0:
        return 1.0
    return min(max(measured / prior, 1 / STRETCH), STRETCH)


def _quantile(ordered: list[float], share: float) -> float:
    position = share * (len(ordered) - 1)
    k = int(position)
    if k + 1 >= len(ordered):
        return ordered[k]
    return ordered[k] + (ordered[k + 1] - ordered[k]) * (position - k)


def pooled(teams: Iterable[Sequence[float]]) -> Spread:
    """The fleet's band: every team's scaled errors (each team's days oldest first, from the
    window's start; days before its first use are left out), PRIOR where too few, and PRIOR
    whole in a fleet of under MIN_TEAMS teams with errors (one team's past is its own, and
    its own errors alone under-cover: see above)."""
    found = [[(horizon, score) for _origin, horizon, score in scores(from_first_use(days))]
             for days in teams]
    found = [rows for rows in found if rows]
    if len(found) < MIN_TEAMS:
        return PRIOR
    return table(row for rows in found for row in rows)


def spread_of(days: Sequence[float], prior: Spread | None = None) -> Spread:
    """A team's band: the fleet's quantiles (`prior`; PRIOR when None) at the team's own scale
    (its days, oldest first, as daily_totals gives them)."""
    return (prior or PRIOR).scaled(scale(from_first_use(days)))


@dataclass(frozen=True)
class Coverage:
    """How often the band held the outcome on the fleet's own past, in one horizon bucket:
    `inside` of `forecasts`; under MIN_FORECASTS of them it says nothing yet."""

    inside: int
    forecasts: int

    @property
    def measured(self) -> bool:
        return self.forecasts >= MIN_FORECASTS

    @property
    def share(self) -> float | None:
        return self.inside / self.forecasts if self.measured else None

    @property
    def in_ten(self) -> int | None:
        return None if self.share is None else round(self.share * 10)


MIN_FORECASTS = 50  # forecasts in a bucket before its coverage is said
CHECKED = 28  # days of rolling origins the coverage is measured over, back from today
REFRESH = 7  # the fleet's quantiles are taken again every this many days of origins
LONGEST_LEFT = 29  # the longest horizon checked: a period's days left


def backtest(teams: Iterable[Sequence[float]], checked: int = CHECKED,
             refresh: int = REFRESH) -> dict[str, Coverage]:
    """The band's coverage on the fleet's past, by horizon bucket. `teams` are daily totals
    over one window (oldest first, the same days for all, CALIBRATION + `checked` long). At
    each of the last `checked` midnights, each team's band for the next 1 .. LONGEST_LEFT days
    is drawn as the product drew it then: the fleet's band pooled from the CALIBRATION days
    before that midnight (taken again every `refresh` days of origins), at the team's scale,
    around its trailing mean; and checked against what it then used. A team whose trailing
    days used nothing has the band [0, 0]: that is what its page shows, so it counts too;
    a team not metered yet does not."""
    teams = [list(days) for days in teams]
    size = max((len(days) for days in teams), default=0)
    counts = {name: [0, 0] for _least, name in BUCKETS}
    for table_day in range(max(1, size - checked), size, refresh):
        fleet = pooled([days[max(0, table_day - CALIBRATION.days):table_day] for days in teams])
        for origin in range(table_day, min(table_day + refresh, size)):
            for days in teams:
                seen = from_first_use(days[max(0, origin - CALIBRATION.days):origin])
                if not seen:
                    continue
                spread, mean = spread_of(seen, fleet), trailing_mean(seen)
                used = 0.0
                for horizon in range(1, min(LONGEST_LEFT, len(days) - origin) + 1):
                    used += days[origin + horizon - 1]
                    low, high = spread.band(mean / 24, horizon * 24)
                    cell = counts[bucket(horizon)]
                    cell[0] += low <= used <= high
                    cell[1] += 1
    return {name: Coverage(*cell) for name, cell in counts.items()}
