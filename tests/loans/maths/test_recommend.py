"""The recommenders' maths: newsvendor quantiles, windows, the commitment advice, quotas and
plan costs."""

import math
import random
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import quotas, recommend
from tests.tiers import examples

RC, RO = Decimal("10"), Decimal("12")  # overage at 1.2x: commit at the 1/6 quantile


def expected_cost(c: float, values: list[float], rc=RC, ro=RO) -> float:
    return sum(recommend.cost(c, u, rc, ro) for u in values) / len(values)


def test_the_newsvendor_commitment_is_the_quantile_at_one_minus_the_rate_ratio():
    uniform = [float(k) for k in range(101)]  # 0..100
    assert recommend.newsvendor(uniform, RC, RO) == pytest.approx(100 / 6)
    assert recommend.newsvendor(uniform, RC, Decimal(20)) == pytest.approx(50)  # the median
    assert recommend.newsvendor(uniform, RC, Decimal(40)) == pytest.approx(75)
    assert recommend.newsvendor(uniform, RC, RC) == 0.0  # no discount: commit nothing


def test_for_a_normal_distribution_it_lands_on_the_normal_quantile():
    rng = random.Random(7)
    values = [rng.gauss(1000, 100) for _ in range(20_000)]
    # z at 1/6 is -0.9674
    assert recommend.newsvendor(values, RC, RO) == pytest.approx(1000 - 96.74, abs=4)


@settings(max_examples=examples(80), deadline=None)
@given(values=st.lists(st.floats(0, 5000, allow_nan=False), min_size=2, max_size=60),
       ratio=st.sampled_from([Decimal("1.2"), Decimal("1.5"), Decimal("2"), Decimal("3")]))
def test_no_commitment_is_cheaper_than_the_newsvendor_by_more_than_one_step(values, ratio):
    """Expected cost is convex and piecewise linear between the observed usages; the
    quantile lies on the segment where its slope changes sign, so the cheapest observed
    usage beats it by at most that segment's slope times its width."""
    ro = RC * ratio
    best = recommend.newsvendor(values, RC, ro)
    ordered = sorted(values)
    gap = max((b - a for a, b in zip(ordered, ordered[1:], strict=False)), default=0)
    floor = min(expected_cost(c, values, RC, ro) for c in [0.0, *ordered])
    assert expected_cost(best, values, RC, ro) <= floor + float(ro) * gap + 1e-6


def test_windows_are_period_long_and_a_day_apart():
    hourly = [2.0] * (90 * 24)
    windows = recommend.period_windows(hourly, 720, 90)
    assert len(windows) == 61 and set(windows) == {1440.0}
    assert len(recommend.period_windows(hourly, 720, 30)) == 1
    assert recommend.period_windows(hourly[:500], 720, 30) == []


def test_steady_use_above_the_commitment_recommends_committing_to_it():
    advice = recommend.advise_commitment([2.0] * (90 * 24), period_hours=720,
                                         current=Decimal(1000), committed_rate=RC,
                                         overage_rate=RO, currency="CNY")
    assert advice.recommended == 1440 and advice.lookback_days == 90
    assert advice.rule_of_thumb == 1152
    assert advice.current_cost == Decimal("10000.00") + 440 * RO
    assert advice.expected_cost == Decimal("14400.00")
    assert advice.saving == advice.current_cost - advice.expected_cost
    # 61 windows a day apart, but about 3 independent months: no more than medium.
    assert advice.confidence == "medium" and advice.worth_changing
    assert recommend.independent_periods(90, 720) == 3


def test_confidence_counts_independent_periods_not_overlapping_windows():
    steady = [1000.0] * 61
    assert recommend.confidence(steady, 90, 730) == "medium"  # 2.96 months
    assert recommend.confidence(steady, 30, 730) == "low"
    assert recommend.confidence(steady, 180, 730) == "high"  # six months, if ever kept
    assert recommend.confidence([600.0, 1400.0], 90, 730) == "low"  # a wide spread


def test_a_falling_history_never_drives_an_over_commitment():
    # 60 days at 3 GPUs, then 30 at 1: the long history alone would over-commit.
    hourly = [3.0] * (60 * 24) + [1.0] * (30 * 24)
    advice = recommend.advise_commitment(hourly, period_hours=720, current=Decimal(2000),
                                         committed_rate=RC, overage_rate=RO, currency="CNY")
    assert advice.long_optimum == pytest.approx(1200)
    assert advice.short_optimum == pytest.approx(720)
    # The trend says it may fall further; half of the fall carried on is 1 GPU - 1 GPU / 2 x 2.
    assert advice.drift_optimum < advice.short_optimum
    assert advice.recommended == recommend.whole(advice.drift_optimum) <= 720


def test_the_forecast_carries_half_of_each_past_change_from_the_last_period():
    hourly = [1.0] * (30 * 24) + [2.0] * (30 * 24) + [3.0] * (30 * 24)  # +720 a month
    moves = recommend.forecast(hourly, 720)
    assert len(moves) == 31
    assert max(moves) == pytest.approx(2160 + 360)  # the last month plus half of +720
    assert recommend.forecast([1.0] * (31 * 24), 720) == []


def test_without_a_period_of_history_there_is_no_advice():
    assert recommend.advise_commitment([1.0] * 600, period_hours=720, current=Decimal(10),
                                       committed_rate=RC, overage_rate=RO, currency="CNY") is None


def test_the_cost_curve_marks_the_minimum_at_the_recommendation():
    rng = random.Random(3)
    hourly = [max(0.0, rng.gauss(4, 1.5)) for _ in range(90 * 24)]
    advice = recommend.advise_commitment(hourly, period_hours=720, current=Decimal(1000),
                                         committed_rate=RC, overage_rate=RO, currency="CNY")
    cheapest = min(advice.curve, key=lambda p: p.expected)
    chosen = next(p for p in advice.curve if p.commitment == float(advice.recommended))
    assert chosen.expected <= cheapest.expected * 1.01
    assert all(p.p10 <= p.expected <= p.p90 for p in advice.curve)


def test_quotas_follow_the_peaks_and_the_busy_share():
    busy_peaks = [10.0] * 96 + [4.0] * 4  # p95 at 10 with a base of 8: raise it
    (raise_base,) = [a for a in quotas.advise_quotas(
        busy_peaks, [1.0] * 100, [0.9] * 100, base=8, cap=16) if a.kind == "base_quota"]
    assert (raise_base.current, raise_base.recommended) == (8, 10)

    quiet = [2.0] * 100  # never over 2, under 70% of 8: lower it to what needs no burst
    (lower,) = quotas.advise_quotas(quiet, [1.0] * 100, [0.9] * 100, base=8, cap=16)
    assert (lower.kind, lower.recommended) == ("base_quota", 2)
    assert lower.evidence["burst_share_advised"] == 0

    capped = [16.0] * 10 + [9.0] * 90  # at the cap 10% of hours
    kinds = {a.kind: a for a in quotas.advise_quotas(capped, [1.0] * 100, [0.9] * 100,
                                                        base=8, cap=16)}
    assert kinds["max_quota"].recommended == 20
    assert kinds["max_quota"].evidence["share_of_hours_at_cap"] == 0.1

    idle = quotas.advise_quotas([6.0] * 100, [6.0] * 100, [1.0] * 100, base=8, cap=16)
    assert [a.kind for a in idle] == ["consolidate"]
    assert idle[0].evidence["busy_share"] == pytest.approx(1 / 6, abs=1e-4)


def test_a_busy_team_whose_bursts_wait_scales_up_and_an_idle_one_consolidates():
    hours = 30 * 24
    peaks, held = [6.0] * hours, [6.0] * hours
    busy = [5.5] * hours  # 92% of held time busy
    base = {a.kind: a for a in quotas.advise_quotas(peaks, held, busy, base=8, cap=16,
                                                       pressed=2, pressed_gpus=4)}["base_quota"]
    assert (base.current, base.recommended) == (8, 12) and base.evidence["bursts_pressed"] == 2
    # Without waiting bursts nothing changes: 6 of 8 GPUs at the 95th percentile is 75%.
    assert [a.kind for a in quotas.advise_quotas(peaks, held, busy, base=8, cap=16)] == []
    # Never past the cap, and no scale-up when the GPUs held sit idle.
    capped = quotas.advise_quotas(peaks, held, busy, base=8, cap=10, pressed=1,
                                     pressed_gpus=8)
    assert [(a.kind, a.recommended) for a in capped if a.kind == "base_quota"] == [
        ("base_quota", 10)]
    idle = quotas.advise_quotas(peaks, held, [1.0] * hours, base=8, cap=16, pressed=3,
                                   pressed_gpus=4)
    assert [a.kind for a in idle] == ["consolidate"]


def test_a_term_commitment_follows_a_clear_trend_and_ignores_a_season():
    month = 720
    steady = recommend.term_commitment([2.0] * (6 * month), period_hours=month, months=12,
                                       committed_rate=RC, overage_rate=RO)
    assert steady.slope == 0 and steady.commitment == 1440 and steady.periods == 6
    assert steady.p10 == steady.p50 == steady.p90 == [1440.0] * 12

    growing = [1.0 + 0.1 * (h // month) for h in range(6 * month)]  # +72 GPU-h a month
    grown = recommend.term_commitment(growing, period_hours=month, months=12,
                                      committed_rate=RC, overage_rate=RO)
    assert grown.slope == pytest.approx(72)
    last = 1.5 * month  # the sixth month's usage
    assert grown.p50[0] > last and grown.p50 == sorted(grown.p50)
    assert grown.commitment > last  # held for a year of growth, it commits above today

    # One cycle of a season fits a slope, but the months do not all move one way.
    season = [1.0 + 0.5 * math.sin(2 * math.pi * (h // month) / 6) for h in range(6 * month)]
    seasonal = recommend.term_commitment(season, period_hours=month, months=12,
                                         committed_rate=RC, overage_rate=RO)
    assert seasonal.slope == 0
    assert recommend.term_commitment([1.0] * 100, period_hours=month, months=12,
                                     committed_rate=RC, overage_rate=RO) is None


def test_a_flat_history_s_term_totals_are_its_exact_bills():
    month = 720
    term = recommend.term_commitment([2.0] * (4 * month), period_hours=month, months=10,
                                     committed_rate=RC, overage_rate=RO)
    totals = term.totals({"advised": 1440.0, "low": 1000.0, "high": 2000.0}, RC, RO)
    # 1,440 GPU-h a period every period: no spread, so every band is the bill of ten periods.
    assert totals["advised"] == pytest.approx((14400 * 10,) * 3)
    assert totals["low"] == pytest.approx(((1000 * 10 + 440 * 12) * 10,) * 3)
    assert totals["high"] == pytest.approx((2000 * 10 * 10,) * 3)


@settings(max_examples=examples(60), deadline=None)
@given(periods=st.integers(1, 5), months=st.integers(1, 14), seed=st.integers(0, 10**6),
       premium=st.sampled_from([Decimal("12"), Decimal("15"), Decimal("30")]),
       c1=st.floats(0, 3000), c2=st.floats(0, 3000))
def test_term_totals_are_ordered_and_move_with_the_commitment_as_bills_do(
        periods, months, seed, premium, c1, c2):
    """Whatever the history, each commitment's P10 <= P50 <= P90; no total is below the
    committed money; and a commitment higher by d changes every path's total by between
    months x d x (r_c - r_o) and months x d x r_c, so each band moves within those bounds
    too (the same paths price both)."""
    rng = random.Random(seed)
    month = 240
    hourly = [rng.uniform(0, 6) * (1 + 0.2 * (h // month)) for h in range(periods * month)]
    term = recommend.term_commitment(hourly, period_hours=month, months=months,
                                     committed_rate=RC, overage_rate=premium)
    low, high = sorted((c1, c2))
    bands = term.totals({"low": low, "high": high}, RC, premium)
    d = (high - low) * months
    for name, c in (("low", low), ("high", high)):
        p10, p50, p90 = bands[name]
        assert c * months * 10 - 1e-6 <= p10 <= p50 <= p90
    for k in range(3):
        moved = bands["high"][k] - bands["low"][k]
        assert d * float(RC - premium) - 1e-6 <= moved <= d * float(RC) + 1e-6


@settings(max_examples=examples(200), deadline=None)
@given(peaks=st.lists(st.floats(0, 64, allow_nan=False), min_size=1, max_size=60),
       growth=st.lists(st.floats(0.2, 3), min_size=1, max_size=6),
       share=st.sampled_from([0.0, 0.01, 0.05, 0.2, 1.0]))
def test_the_base_quota_for_bursts_is_the_least_that_keeps_burst_hours_within_the_share(
        peaks, growth, share):
    """Brute force: try every whole quota from 0 up and count the hours ahead (each peak in
    each period, grown) that exceed it."""
    hours = [p * g for g in growth for p in peaks]

    def needing_a_burst(base: int) -> int:
        return sum(1 for h in hours if h > base + 1e-9)

    least = next(b for b in range(0, 200) if needing_a_burst(b) <= share * len(hours) + 1e-9)
    assert quotas.base_for_bursts(peaks, growth, share) == least
    assert quotas.share_above(peaks, growth, least) <= share + 1e-9


def test_a_growing_team_s_base_quota_is_read_on_the_demand_the_term_model_forecasts():
    month = 720
    # Usage a month grows by 10% of the first: 4 GPUs at once, then 4.4, ..., 6 in month six.
    growing = [4.0 * (1 + 0.1 * (h // month)) for h in range(6 * month)]
    term = recommend.term_commitment(growing, period_hours=month, months=12,
                                     committed_rate=RC, overage_rate=RO)
    assert term.growth == sorted(term.growth) and term.growth[0] > 1
    recent = growing[-month:]
    # Today's 6 GPUs fit a base quota of 6: read on today's hours, nothing to raise.
    assert quotas.advise_quotas(recent, recent, recent, base=6, cap=16) == []
    (base,) = quotas.advise_quotas(recent, recent, recent, base=6, cap=16,
                                      growth=term.growth)
    # Over the year ahead the same hours grow past 6 GPUs; 95% of them fit the advice.
    assert base.kind == "base_quota" and base.recommended > 6
    assert base.recommended == quotas.base_for_bursts(recent, term.growth, 0.05)
    assert base.evidence["burst_share_now"] > 0.05 >= base.evidence["burst_share_advised"]


def test_the_term_bands_are_as_wide_as_a_few_periods_can_tell_and_growth_is_not_damped():
    """The band held 34% of realised months (3 months seen) in bench/backtest.py: the normal's
    P10-P90 around a spread read from three periods, no error in the slope, and growth damped
    away (57 of 60 growing months fell above it)."""
    month = 720
    growing = [1.0 + 0.1 * (h // month) for h in range(6 * month)]  # +72 GPU-h a month
    grown = recommend.term_commitment(growing, period_hours=month, months=12,
                                      committed_rate=RC, overage_rate=RO)
    assert grown.p50[-1] == pytest.approx(1.5 * month + 12 * 72)  # the line, undamped
    shrinking = [2.0 - 0.1 * (h // month) for h in range(6 * month)]
    shrunk = recommend.term_commitment(shrinking, period_hours=month, months=12,
                                       committed_rate=RC, overage_rate=RO)
    assert shrunk.p50[-1] > 1.5 * month - 12 * 72  # a decline slows

    rng = random.Random(3)
    noisy = [v * (1 + 0.02 * math.sin(h // month * 2.1)) + rng.uniform(-0.05, 0.05)
             for h, v in enumerate(growing)]
    term = recommend.term_commitment(noisy, period_hours=month, months=12,
                                     committed_rate=RC, overage_rate=RO)
    widths = [high - low for low, high in zip(term.p10, term.p90, strict=True)]
    assert term.slope > 0 and widths == sorted(widths) and widths[-1] > widths[0]  # its error
    # The same spread read from fewer periods is less certain: Student's t, not the normal.
    assert recommend.period_spread(100.0, 1, 3, 0.0, 0) > recommend.period_spread(
        100.0, 5, 6, 0.0, 0) > 100 * 1.2816
    # What the windows already show is not counted twice: with all of the periods' noise in
    # them, only the fit's own error is left.
    assert recommend.period_spread(100.0, 5, 6, 0.0, 0, shown=100.0 ** 2) == pytest.approx(
        1.476 * 100 * math.sqrt(1 / 6))


def monthly(totals: list[float], month: int = 720) -> list[float]:
    """An hourly series whose whole months sum to `totals`, flat inside each month."""
    return [total / month for total in totals for _hour in range(month)]


def test_a_steep_trend_read_from_under_six_periods_is_a_season_and_the_windows_cap_it():
    """Three months of a six-month season all rise: read half as growth (the old hedge), the
    daily advice trailed 80% of average use by 12 points of hindsight's cost in
    bench/backtest.py (seasonal, 3x), and by 4 (seasonal, 1.5x)."""
    month = 720
    rising = monthly([720, 936, 1152])  # 216 GPU-h a month: 12 more months would treble it
    term = recommend.term_commitment(rising, period_hours=month, months=12,
                                     committed_rate=RC, overage_rate=Decimal(30))
    assert term.slope == 0  # a season's flank, not growth to bet on
    windows = recommend.period_windows(rising, month, 90)
    # No trend from so few periods: never more than the first-commitment path's quantile.
    assert term.commitment <= recommend.whole(recommend.newsvendor(windows, RC, Decimal(30)))
    # Six periods that all rise are a trend on their own.
    grown = recommend.term_commitment(monthly([720 + 216 * k for k in range(6)]),
                                      period_hours=month, months=12, committed_rate=RC,
                                      overage_rate=RO)
    assert grown.slope == pytest.approx(216) and grown.p10[0] > 6 * 216


def test_a_gentle_trend_read_from_three_periods_is_growth_carried_whole():
    """A team growing 7% a month: with the old hedge (half the outcomes at the periods'
    mean) the daily advice lost 10.6% against hindsight at 3x, 2.7% now."""
    month = 720
    term = recommend.term_commitment(monthly([1000, 1070, 1140]), period_hours=month,
                                     months=12, committed_rate=RC, overage_rate=RO)
    assert term.slope == pytest.approx(70)
    assert term.centres == pytest.approx([1140 + 70 * j for j in range(1, 13)])


def test_a_slope_from_three_noisy_periods_needs_students_t_not_two_standard_errors():
    """1,000, 1,100 and 1,150 GPU-h: a slope of 75 at 5.2 standard errors, a trend by the
    normal's two (a spurious one cost bursty histories 3 points at 3x), not by Student's t
    at one degree of freedom (6.31)."""
    term = recommend.term_commitment(monthly([1000, 1100, 1150]), period_hours=720,
                                     months=12, committed_rate=RC, overage_rate=RO)
    assert term.slope == 0
    assert term.centres == pytest.approx([3250 / 3] * 12)


def test_a_decline_stops_at_the_floor_of_todays_level():
    """Six months falling 60 GPU-h a month from 700: carried on for a year, the decline read
    nothing left by the seventh month (the daily advice lost 112% against hindsight when the
    team went on using a fifth); it stops at DECLINE_FLOOR of today's level."""
    month = 720
    term = recommend.term_commitment(monthly([700 - 60 * k for k in range(6)]),
                                     period_hours=month, months=12, committed_rate=RC,
                                     overage_rate=RO)
    assert term.slope == pytest.approx(-60)
    assert term.centres[0] == pytest.approx(400 - 60 * recommend.DECLINE_DAMPING)
    assert min(term.centres) == pytest.approx(recommend.DECLINE_FLOOR * 400)
    assert term.commitment > 0


def test_a_short_level_reads_its_windows_both_ways_as_the_unseen_flank_of_a_season():
    """Three months on one flank of a season: the windows all fall short of the level on
    one side, and the model's low quantiles came from them alone (1.13 points of hindsight's
    cost behind 80% of average use, seasonal 1.2x, bench/backtest.py; 0.77 now)."""
    month = 720
    flank = [1.0 + 0.4 * math.sin(math.pi * h / (3 * month)) for h in range(3 * month)]
    term = recommend.term_commitment(flank, period_hours=month, months=12,
                                     committed_rate=RC, overage_rate=RO)
    assert term.slope == 0
    for low, centre, high in zip(term.p10, term.centres, term.p90, strict=True):
        assert low + high == pytest.approx(2 * centre)  # as wide below the level as above
    six = recommend.term_commitment(flank + flank, period_hours=month, months=12,
                                    committed_rate=RC, overage_rate=RO)
    assert six.p10[0] + six.p90[0] != pytest.approx(2 * six.centres[0])  # six show a cycle
