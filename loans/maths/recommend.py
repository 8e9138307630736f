"""The commitment to advise from usage history: the one that minimises expected cost, for one
period or held over a term (quotas: loans.maths.quotas). Pure: plain lists and Decimals in,
plain results out.

The commitment is the newsvendor problem. Committing C GPU-hours costs C * r_c whatever
happens, and usage U above C costs r_o per GPU-hour, so the expected cost
E[C r_c + max(0, U - C) r_o] falls while P(U > C) > r_c / r_o and rises after: the optimum is
the quantile of U at 1 - r_c / r_o. U's distribution comes from rolling period-length windows
over the lookback; every candidate is also priced on each window, which gives the cost curve
and its P10-P90 band.

The windows of one lookback describe how usage varied inside it, not how much the next period
may move away from it. So the quantile is also taken of a forecast: the last period's usage
plus each period-to-period change seen in the history, damped by half (usage partly reverts:
undamped, the noise of two periods counts as a trend; bench/backtest.py measured 0.5 against
0 and 1). Committing too little costs the
overage premium on the gap; committing too much costs the full rate of the unused part; so
the lowest of the optima (longest lookback, shortest lookback, forecast) is the one advised.
"""

import math
import random
import statistics
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from functools import cached_property

import numpy as np

from loans.maths.billing import money

DAY_HOURS = 24
LOOKBACKS = (90, 60, 30)  # days, longest first
CANDIDATES = 60
DAMPING = 0.5  # share of a past period-to-period change expected to carry on


def period_windows(hourly: list[float], period_hours: int, lookback_days: int) -> list[float]:
    """Usage of every period-length window that starts on a day boundary inside the last
    `lookback_days` of `hourly` (oldest first; the series ends now)."""
    span = lookback_days * DAY_HOURS
    if len(hourly) < max(span, period_hours):
        return []
    recent = hourly[-span:] if span >= period_hours else hourly[-period_hours:]
    # The running sums, added one hour after another as a loop would (cumsum is sequential).
    prefix = np.concatenate(([0.0], np.cumsum(np.asarray(recent, dtype=float))))
    starts = np.arange(0, len(recent) - period_hours + 1, DAY_HOURS)
    return (prefix[starts + period_hours] - prefix[starts]).tolist()


def longest_windows(hourly: list[float], period_hours: int) -> tuple[int, list[float]] | None:
    """The longest of LOOKBACKS the history covers, with its period-long windows; None
    without a period's worth of history."""
    for days in LOOKBACKS:
        windows = period_windows(hourly, period_hours, days)
        if windows:
            return days, windows
    return None


def quantile(values: list[float], q: float) -> float:
    """The q-quantile, linear between order statistics (q in [0, 1])."""
    return in_order(sorted(values), q)


def in_order(ordered: list[float], q: float) -> float:
    """quantile() of values already sorted."""
    if not ordered:
        raise ValueError("no values")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def newsvendor(values: list[float], committed_rate: Decimal, overage_rate: Decimal) -> float:
    """The commitment minimising expected cost: the quantile of usage at 1 - r_c / r_o."""
    if overage_rate <= 0 or committed_rate >= overage_rate:
        return 0.0  # committing saves nothing: buy everything at the overage rate
    return quantile(values, 1 - float(committed_rate / overage_rate))


def cost(commitment: float, usage: float, committed_rate: Decimal,
         overage_rate: Decimal) -> float:
    return commitment * float(committed_rate) + max(0.0, usage - commitment) * float(overage_rate)


@dataclass(frozen=True)
class CurvePoint:
    commitment: float
    expected: float
    p10: float
    p90: float


def cost_curve(values: list[float], candidates: list[float], committed_rate: Decimal,
               overage_rate: Decimal) -> list[CurvePoint]:
    curve = []
    rate, premium = float(committed_rate), float(overage_rate)  # cost()'s, converted once
    used = np.asarray(values, dtype=float)
    for c in candidates:
        # cost() of every value at once: the same operations on each, in the same order.
        costs = c * rate + np.maximum(0.0, used - c) * premium
        ordered = np.sort(costs).tolist()
        curve.append(CurvePoint(c, statistics.fmean(ordered), in_order(ordered, 0.1),
                                in_order(ordered, 0.9)))
    return curve



@dataclass(frozen=True)
class CommitmentAdvice:
    recommended: Decimal
    current: Decimal
    rule_of_thumb: Decimal  # 80% of average usage
    expected_cost: Decimal
    current_cost: Decimal
    rule_cost: Decimal
    saving: Decimal  # expected, per period, against keeping the current commitment
    lookback_days: int
    windows: int
    confidence: str
    curve: list[CurvePoint]
    long_optimum: float
    short_optimum: float | None
    drift_optimum: float | None
    term: "TermAdvice | None" = None  # the term model, when the commitment is held for a term

    @property
    def worth_changing(self) -> bool:
        return self.saving > 0 and self.recommended != self.current


def whole(value: float) -> Decimal:
    return Decimal(value).quantize(Decimal(1), rounding=ROUND_CEILING) if value > 0 else Decimal(0)


def advise_commitment(hourly: list[float], *, period_hours: int, current: Decimal,
                      committed_rate: Decimal, overage_rate: Decimal, currency: str,
                      term_months: int | None = None,
                      term: "TermAdvice | None" = None) -> CommitmentAdvice | None:
    """The commitment to ask for, from the longest lookback that has history; the shortest
    lookback is run too and the lower of the two optima taken, so a stale history never drives
    an over-commitment. None without a period's worth of history.

    With `term_months`, the commitment is held for that many periods: it and its cost curve
    come from the term model (term_commitment, or `term` where the caller fitted it), the
    expected cost a period over the term."""
    found = longest_windows(hourly, period_hours)
    if found is None:
        return None
    lookback, values = found
    long_optimum = newsvendor(values, committed_rate, overage_rate)
    short_values = period_windows(hourly, period_hours, LOOKBACKS[-1])
    short_optimum = (newsvendor(short_values, committed_rate, overage_rate)
                     if short_values and lookback != LOOKBACKS[-1] else None)
    moves = forecast(hourly, period_hours)
    drift_optimum = newsvendor(moves, committed_rate, overage_rate) if moves else None
    chosen = min(x for x in (long_optimum, short_optimum, drift_optimum) if x is not None)
    recommended = whole(chosen)
    rule = whole(0.8 * statistics.fmean(values))
    if term is None and term_months:
        term = term_commitment(hourly, period_hours=period_hours, months=term_months,
                               committed_rate=committed_rate, overage_rate=overage_rate)
    priced = values
    if term is not None:
        recommended = term.commitment
        lookback = term.periods * period_hours // DAY_HOURS  # what the model read
        # The term's pooled periods, as 201 quantiles: the curve costs the same at any pool.
        pool = sorted(term.outcomes)
        priced = [pool[round(k * (len(pool) - 1) / 200)] for k in range(201)]
    top = max(max(values), max(priced), float(current), 1.0) * 1.2
    grid = sorted({round(top * k / CANDIDATES, 3) for k in range(CANDIDATES + 1)}
                  | {float(recommended), float(current), float(rule)})
    curve = cost_curve(priced, grid, committed_rate, overage_rate)
    by_c = {p.commitment: p for p in curve}

    def expected(c: Decimal) -> Decimal:
        return money(Decimal(repr(by_c[float(c)].expected)), currency)

    return CommitmentAdvice(
        recommended=recommended, current=current, rule_of_thumb=rule,
        expected_cost=expected(recommended), current_cost=expected(current),
        rule_cost=expected(rule), saving=expected(current) - expected(recommended),
        lookback_days=lookback, windows=len(values),
        confidence=confidence(values, lookback, period_hours), curve=curve,
        long_optimum=long_optimum, short_optimum=short_optimum, drift_optimum=drift_optimum,
        term=term,
    )


DECLINE_DAMPING = 0.95  # of a decline, the share that carries into each later period
DECLINE_FLOOR = 0.3  # of today's level, below which a decline is not forecast to go
TREND_PERIODS = 6  # periods that show a trend on their own (fewer: see term_commitment)
# Student's t at 0.95 by degrees of freedom: a slope read from 3 to 6 periods counts as a
# trend only past this many standard errors (2, the normal's, from 7 periods on).
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132}
TOTAL_DRAWS = 400  # term paths for the totals' bands: about 3 ms a contract in the daily job
TOTAL_SEED = 20261202


@dataclass(frozen=True)
class TermAdvice:
    """One commitment held for a whole term, from a demand model of whole periods."""

    commitment: Decimal
    periods: int  # how many whole periods of history the model was fitted to
    slope: float  # GPU-hours a period, per period (0 with under three periods)
    p10: list[float]  # each term period's usage band
    p50: list[float]
    p90: list[float]
    outcomes: list[float] = field(default_factory=list, repr=False)  # the term's pooled periods
    level_error: float = 0.0  # standard error of the fitted level, shared by every period
    centres: list[float] = field(default_factory=list, repr=False)  # each period's trend
    level: float = 0.0  # the trend at the last whole period of history: today's usage

    @property
    def growth(self) -> list[float]:
        """Each term period's usage as the trend forecasts it, against today's: what the
        concurrent demand of today's hours is scaled by (1.0 a period without a trend)."""
        if self.level <= 0:
            return [1.0] * len(self.centres)
        return [centre / self.level for centre in self.centres]

    def expected_total(self, commitment: float, committed_rate: Decimal,
                       overage_rate: Decimal) -> float:
        """The expected cost over the term under these numbers: each period's mean bill over
        its outcomes, summed (the pool holds the periods in equal blocks)."""
        rate, premium = float(committed_rate), float(overage_rate)
        bills = commitment * rate + premium * np.maximum(0.0, self._outcomes - commitment)
        # fmean sums exactly (math.fsum), so the order of the bills does not matter.
        return statistics.fmean(bills.tolist()) * len(self.p50)

    @cached_property
    def _outcomes(self) -> np.ndarray:
        return np.asarray(self.outcomes, dtype=float)

    def totals(self, commitments: dict[str, float], committed_rate: Decimal,
               overage_rate: Decimal) -> dict[str, tuple[float, float, float]]:
        """P10, P50 and P90 of the total cost over the term for each named commitment.

        A term's total is not the sum of each period's band: TOTAL_DRAWS seeded paths draw
        one outcome for each period (independent, as the model's period-to-period noise is)
        and shift the whole path by one draw of the level's error, which every period
        shares (a level fitted a little high is high for the whole term). The same paths
        price every commitment, so their totals compare like for like."""
        months = len(self.p50)
        block = len(self.outcomes) // months
        rng = random.Random(TOTAL_SEED)  # noqa: S311 - seeded for repeatable advice
        paths = []
        for _ in range(TOTAL_DRAWS):
            shift = rng.gauss(0.0, self.level_error) if self.level_error else 0.0
            paths.append([max(0.0, self.outcomes[j * block + rng.randrange(block)] + shift)
                          for j in range(months)])
        rate, premium = float(committed_rate), float(overage_rate)
        drawn = np.asarray(paths, dtype=float)
        out = {}
        for name, c in commitments.items():
            # Each path's overage, its periods added in order (as sum() over the path would).
            over = np.zeros(len(paths))
            for j in range(months):
                over = over + np.where(drawn[:, j] > c, drawn[:, j] - c, 0.0)
            totals = np.sort(months * c * rate + premium * over).tolist()
            out[name] = tuple(in_order(totals, q) for q in (0.1, 0.5, 0.9))
        return out


def term_commitment(hourly: list[float], *, period_hours: int, months: int,
                    committed_rate: Decimal, overage_rate: Decimal) -> TermAdvice | None:
    """The commitment that minimises the expected total over the next `months` periods when
    it cannot change in between. Demand is a linear trend fitted to the history's whole
    periods (none with under three; a decline damped and floored), plus the deviations of every
    period-long window (a day apart) from that trend and the periods' own spread around it,
    as wide as so few periods can tell (period_spread); the term's periods pool into one
    distribution, whose quantile at 1 - r_c / r_o minimises the expected sum of the periods'
    costs (each is a newsvendor cost with the same C). None without a period of history."""
    count = len(hourly) // period_hours
    if count < 1:
        return None
    tail = hourly[len(hourly) - count * period_hours:]
    totals = [sum(tail[k * period_hours:(k + 1) * period_hours]) for k in range(count)]
    # No trend: the periods' mean, and their spread around it.
    no_trend = (0.0, statistics.stdev(totals) if count > 1 else 0.0, count - 1)
    slope, spread, freedom = no_trend
    mean_x, mean_y = (count - 1) / 2, statistics.fmean(totals)
    sxx = sum((k - mean_x) ** 2 for k in range(count))
    if count >= 3:
        fitted = sum((k - mean_x) * (y - mean_y) for k, y in enumerate(totals)) / sxx
        residuals = [y - mean_y - fitted * (k - mean_x) for k, y in enumerate(totals)]
        around_line = math.sqrt(sum(r * r for r in residuals) / (count - 2))
        # A trend only where the periods show one: past Student's t of its standard error,
        # and every period moving the same way (one cycle of a season fits a slope too).
        # From fewer than TREND_PERIODS periods a trend may be half a season (three months
        # of a six-month cycle all move one way): one that would move usage by more than
        # today's level within the term is read as a season, not as a trend to bet on.
        steps = [b - a for a, b in zip(totals, totals[1:], strict=False)]
        level = mean_y + fitted * (count - 1 - mean_x)
        if (abs(fitted) > T95.get(count - 2, 2.0) * around_line / math.sqrt(sxx)
                and all(step * fitted > 0 for step in steps)
                and (count >= TREND_PERIODS or abs(fitted) * months <= level)):
            slope, spread, freedom = fitted, around_line, count - 2
    windows = period_windows(tail, period_hours, len(tail) // DAY_HOURS)
    last = (mean_y - slope * mean_x) + slope * (count - 1)  # the line at the last period

    def ahead(slope: float, spread: float, freedom: int) -> list[tuple[float, list[float]]]:
        """Each term period's centre and outcomes along a line of `slope` through the
        periods' mean: the windows' deviations from the line, and the periods' spread
        around it that the windows do not show, at its P10, P50 and P90."""
        intercept = mean_y - slope * mean_x

        def trend(position: float) -> float:  # in periods: 0 is the first whole period
            return intercept + slope * position

        deviations = [w - trend(k * DAY_HOURS / period_hours) for k, w in enumerate(windows)]
        shown = statistics.pvariance(deviations) if len(deviations) > 1 else 0.0
        if not slope and count < TREND_PERIODS:
            # A few months may be one flank of a season, the other yet unseen: each window's
            # deviation from the level counts both ways (at 3 months seen, 1.13 points of
            # hindsight's cost behind 80% of average use became 0.77 in bench/backtest.py).
            deviations += [-d for d in deviations]
        # A decline slows as usage nears what the team cannot do without, and stops at
        # DECLINE_FLOOR of today's level (carried on, a year's decline read from six months
        # forecast nothing left, and the team went on using a fifth of it); growth carries
        # on (damped, it under-forecast 57 of 60 growing months in bench/backtest.py).
        damping = DECLINE_DAMPING if slope < 0 else 1.0
        start, carried, periods = trend(count - 1), 0.0, []
        for j in range(1, months + 1):
            carried += slope * damping ** j
            centre = max(0.0, DECLINE_FLOOR * start, start + carried)
            z = period_spread(spread, freedom, count, count - 1 + j - mean_x,
                              sxx if slope else 0, shown)
            periods.append((centre, [max(0.0, centre + d + k * z)
                                     for d in deviations for k in (-1.0, 0.0, 1.0)]))
        return periods

    bands, pooled, centres = ([], [], []), [], []
    for centre, outcomes in ahead(slope, spread, freedom):
        centres.append(centre)
        pooled.extend(outcomes)
        for band, q in zip(bands, (0.1, 0.5, 0.9), strict=True):
            band.append(quantile(outcomes, q))
    commitment = newsvendor(pooled, committed_rate, overage_rate)
    if not slope and count < TREND_PERIODS and windows:
        # The spread of so few periods is itself a guess: the commitment is the lower of the
        # model's and the first-commitment path's (the quantile of the windows alone), as
        # committing too much is paid at the full rate.
        commitment = min(commitment, newsvendor(windows, committed_rate, overage_rate))
    commitment = whole(commitment)
    level_error = spread / math.sqrt(count) if count > 1 else 0.0
    return TermAdvice(commitment, count, slope, *bands, outcomes=pooled,
                      level_error=level_error, centres=centres, level=max(0.0, last))


# Student's t at 0.9 by degrees of freedom: a spread read from 2 to 7 periods is itself
# uncertain, so its P10-P90 is wider than the normal's 1.2816.
T90 = {1: 3.078, 2: 1.886, 3: 1.638, 4: 1.533, 5: 1.476, 6: 1.440, 7: 1.415, 8: 1.397,
       9: 1.383, 10: 1.372, 12: 1.356, 15: 1.341, 20: 1.325, 30: 1.310}


def t90(freedom: int) -> float:
    """From the table, at the nearest degrees of freedom at or below (the wider)."""
    return T90[max(k for k in T90 if k <= freedom)]


def period_spread(spread: float, freedom: int, count: int, ahead: float, sxx: float,
                  shown: float = 0.0) -> float:
    """The distance from a period's P50 to its P90 (and P10) that the windows' deviations do
    not already give: of the periods' noise s^2, what the windows do not show (their
    variance `shown`; the windows of a short history show less of it than whole periods
    do), plus the fit's own error, s^2 (1/n + (x - mean x)^2 / Sxx), which shrinks with the
    periods fitted and, for a trend, grows with how far ahead the period lies (the slope's
    error); at Student's t, as s is read from few periods. Zero with one period: nothing
    shows how periods differ."""
    if freedom < 1 or spread <= 0:
        return 0.0
    fit = 1 / count + (ahead * ahead / sxx if sxx else 0.0)
    return t90(freedom) * math.sqrt(max(0.0, spread * spread - shown) + spread * spread * fit)


def forecast(hourly: list[float], period_hours: int) -> list[float]:
    """Next period's usage as the last period's plus each period-to-period change seen in
    the longest lookback (windows a day apart), damped; empty with under two changes."""
    days = min(LOOKBACKS[0], len(hourly) // DAY_HOURS)
    windows = period_windows(hourly, period_hours, days) if days else []
    step = period_hours // DAY_HOURS
    changes = [b - a for a, b in zip(windows, windows[step:], strict=False)]
    if len(changes) < 2:
        return []
    last = windows[-1]
    return [max(0.0, last + DAMPING * change) for change in changes]


def independent_periods(lookback_days: int, period_hours: int) -> float:
    """How many periods the lookback holds without overlap: the windows a day apart share most
    of their hours (61 windows of a 90-day history are about 3 observations, not 61)."""
    return lookback_days * DAY_HOURS / period_hours


def confidence(values: list[float], lookback_days: int, period_hours: int) -> str:
    """High only with about six or more independent periods of steady history; medium with about
    three (90 days of monthly periods) and a moderate spread; low otherwise."""
    mean = statistics.fmean(values)
    spread = statistics.pstdev(values) / mean if mean > 0 else 1.0
    periods = independent_periods(lookback_days, period_hours)
    if periods >= 5.5 and spread < 0.15:
        return "high"
    if periods >= 2.5 and spread < 0.3:
        return "medium"
    return "low"
