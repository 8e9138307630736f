"""The band the product drew before the conformal one (loans.maths.forecast), kept as
bench/forecast.py's baseline; the product does not import it.

How sure the burn-down's forecast was: a P10-P90 band on the GPU-hours a period will still use,
calibrated on the team's own forecast errors. Pure: plain floats and datetimes.

The point forecast is the trailing rate (loans.maths.burndown): the mean GPU-hours an hour over
the 7 days before now, for every hour left. `bench/forecast.py` measured an exponentially
weighted rate beside it and kept the trailing mean (see its output). The band is what that
forecaster got wrong before, not what independent days would give: real teams' usage moves in
level shifts and trends, so its errors grow faster than the square root of the horizon.

Rolling origins over the team's history: at each past midnight with a week before it, the
trailing mean of that week was a forecast of the next 1, 2, ... 14 days; each error is counted
in days of that week's mean use (scale-free, so teams of any size share a shape). Their mean
square at horizon h is fitted as

    variance(h) = iid x h + level x h^2

(day-to-day noise, which adds up like independent days, and a level the next days share, which
adds up in proportion), with `level` at least a tenth of `iid` (a team's level is never known
for sure); the band at h days is the forecast -/+ 1.2816 standard deviations, in proportion to
the trailing rate. A team with under MIN_DAYS days of history gets the fleet's errors pooled
(`pooled`, from every team with that much history, loans.services.ledger.forecasting), or,
in a fleet of under MIN_TEAMS such teams, PRIOR, fitted the same way on the pooled errors of
the bench's public traces: a new team starts honest.

COVERAGE is what the bench measured: the share of periods that ended inside the band, by days
left; the pages say it beside the band.
"""

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

Z90 = 1.2815515655446004  # the standard normal's 0.9 quantile: P10/P90 = mean -/+ Z90 * sd
WEEK = 7  # days of the trailing mean, as loans.maths.burndown's
LONGEST = 14  # the longest horizon fitted, in days
CALIBRATION = timedelta(days=56)  # the history the errors are taken from
MIN_ORIGINS = 5  # rolling origins a horizon needs to count
MIN_DAYS = WEEK + 5  # days of history before a team's own errors are used
MIN_TEAMS = 3  # teams with that much history before the fleet's pooled errors replace PRIOR
LEAST_LEVEL = 0.1  # level >= LEAST_LEVEL x iid


@dataclass(frozen=True)
class Spread:
    """The variance of the trailing mean's error over h days, in (days of its use)^2:
    iid x h + level x h^2; `own` when fitted on the team's history, not the prior."""

    iid: float
    level: float
    own: bool = True
    # The mean square errors measured at 1, 2, ... LONGEST days (0 where too few origins): a
    # horizon the fit runs under (a weekly rhythm the smooth curve misses) keeps what was
    # measured there.
    measured: tuple[float, ...] = ()

    def relative_sd(self, days: float) -> float:
        if days <= 0:
            return 0.0
        variance = self.iid * days + self.level * days * days
        whole = math.ceil(days)
        if whole <= len(self.measured):
            variance = max(variance, self.measured[whole - 1] * days / whole)
        return math.sqrt(max(0.0, variance))

    def band(self, per_hour: float, hours: float) -> tuple[float, float]:
        """P10 and P90 of the GPU-hours used over the next `hours` at the trailing rate
        `per_hour`: never below zero."""
        days = max(0.0, hours) / 24
        half = Z90 * self.relative_sd(days) * per_hour * 24
        expected = per_hour * max(0.0, hours)
        return max(0.0, expected - half), expected + half


# Fitted by bench/forecast.py on the pooled errors of its public traces (Philly, the demo's
# teams, synthetic shapes), as it prints it.
PRIOR = Spread(iid=0.126, level=0.0126, own=False)

# Share of realised period ends inside P10-P90 on bench/forecast.py's traces, by days left in
# the period (at least), as it printed it on its last run.
COVERAGE = ((16, 0.81), (8, 0.84), (0, 0.82))


def coverage(days_left: float) -> float:
    """The bench's measured coverage of the band at `days_left`."""
    return next(share for least, share in COVERAGE if days_left >= least)


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


def errors(days: list[float], horizon: int) -> list[float]:
    """The trailing week's mean as a forecast of the next `horizon` days, at every origin with
    a week before it and the horizon after it: each error in days of that mean's use (origins
    whose week used nothing are left out: there is no scale)."""
    out = []
    for k in range(WEEK, len(days) - horizon + 1):
        mean = sum(days[k - WEEK:k]) / WEEK
        if mean > 0:
            out.append((sum(days[k:k + horizon]) - horizon * mean) / mean)
    return out


def spread_of(days: list[float], prior: Spread | None = None) -> Spread:
    """The team's spread from its daily totals (daily_totals), or `prior` (PRIOR when None:
    the pooled spread of the fleet, loans.services.ledger.forecasting) where it has under MIN_DAYS
    days."""
    prior = prior or PRIOR
    if len(days) < MIN_DAYS:
        return prior
    rows = _mean_squares([days])
    if not rows:
        return prior
    measured = dict.fromkeys(range(1, LONGEST + 1), 0.0) | {h: v for h, v, _n in rows}
    return dataclasses.replace(fitted(rows), measured=tuple(measured.values()))


def pooled(teams: list[list[float]]) -> Spread | None:
    """The spread of many teams' errors pooled, horizon by horizon (each team's daily totals,
    oldest first): what a team without history of its own starts with. None where fewer than
    MIN_TEAMS teams have MIN_DAYS days."""
    usable = [days for days in teams if len(days) >= MIN_DAYS and any(days)]
    if len(usable) < MIN_TEAMS:
        return None
    rows = _mean_squares(usable)
    return dataclasses.replace(fitted(rows), own=False) if rows else None


def _mean_squares(series: list[list[float]]) -> list[tuple[int, float, int]]:
    """(horizon, mean square error, origins) over every series' rolling origins, for each
    horizon with MIN_ORIGINS of them."""
    rows = []
    for horizon in range(1, LONGEST + 1):
        found = [e for days in series for e in errors(days, horizon)]
        if len(found) >= MIN_ORIGINS:
            rows.append((horizon, sum(e * e for e in found) / len(found), len(found)))
    return rows


def fitted(rows: list[tuple[int, float, int]]) -> Spread:
    """iid x h + level x h^2 fitted to (h, mean square error, origins), least squares
    weighted by origins over the variance squared (each horizon's relative misfit counts),
    neither coefficient negative, level at least LEAST_LEVEL x iid."""
    if all(v <= 0 for _h, v, _n in rows):
        return Spread(0.0, 0.0)
    floor = min(v for _h, v, _n in rows if v > 0)
    weighted = [(h, v, n / max(v, floor) ** 2) for h, v, n in rows]
    iid, level = _least_squares(weighted)
    if iid < 0 or level < 0:
        only_iid = (_one(weighted, 1), 0.0)
        only_level = (0.0, _one(weighted, 2))
        iid, level = min(only_iid, only_level, key=lambda c: _misfit(weighted, *c))
    return Spread(iid, max(level, LEAST_LEVEL * iid))


def _least_squares(rows) -> tuple[float, float]:
    a11 = sum(w * h * h for h, _v, w in rows)
    a12 = sum(w * h ** 3 for h, _v, w in rows)
    a22 = sum(w * h ** 4 for h, _v, w in rows)
    b1 = sum(w * h * v for h, v, w in rows)
    b2 = sum(w * h * h * v for h, v, w in rows)
    det = a11 * a22 - a12 * a12
    if det <= 1e-12 * a11 * a22:
        return -1.0, -1.0  # one horizon only: fit each alone
    return (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det


def _one(rows, power: int) -> float:
    den = sum(w * h ** (2 * power) for h, _v, w in rows)
    return sum(w * h ** power * v for h, v, w in rows) / den if den else 0.0


def _misfit(rows, iid: float, level: float) -> float:
    return sum(w * (v - iid * h - level * h * h) ** 2 for h, v, w in rows)
