from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import forecast
from loans.maths.burndown import burndown, trailing_rate
from tests.tiers import examples

H = timedelta(hours=1)
START = datetime(2026, 11, 1, tzinfo=UTC)
END = START + timedelta(days=30)


def flat(rate: float, start: datetime, end: datetime) -> dict[datetime, float]:
    usage, hour = {}, start
    while hour < end:
        usage[hour] = rate
        hour += H
    return usage


def test_a_period_half_gone_at_a_steady_rate_shows_remaining_ideal_and_forecast():
    now = START + timedelta(days=15)
    result = burndown(start=START, end=END, committed=720.0, usage=flat(2.0, START, now), now=now)
    assert len(result.points) == 30 * 24 + 1
    assert result.used == 720.0  # 15 days x 24 h x 2 GPUs
    assert result.ideal[0] == 720.0 and result.ideal[-1] == 0.0
    middle = result.points.index(now)
    assert result.ideal[middle] == pytest.approx(360.0)
    assert result.remaining[0] == 720.0 and result.remaining[middle] == 0.0
    assert result.remaining[middle + 1] is None
    assert result.forecast[middle] == 0.0 and result.forecast[middle - 1] is None
    assert result.forecast[-1] == pytest.approx(-720.0)  # 2 GPU-h/h for 360 more hours
    assert result.rate_per_hour == pytest.approx(2.0)
    assert result.projected_used == pytest.approx(1440.0)
    assert result.projected_overage == pytest.approx(720.0)
    assert result.projected_exhaustion == now
    # A perfectly steady week: the band is the fleet's at the least scale, a near-constant
    # team's (SCALE_FLOOR), a few per cent either side of the forecast, never nothing.
    assert -720.0 * 1.15 < result.forecast_p10[-1] < -720.0 < result.forecast_p90[-1] < (
        -720.0 * 0.85)


def test_the_forecast_predicts_exhaustion_from_the_trailing_week_only():
    now = START + timedelta(days=10)
    usage = flat(10.0, START, START + timedelta(days=3)) | flat(1.0, now - timedelta(days=7), now)
    result = burndown(start=START, end=END, committed=1500.0, usage=usage, now=now)
    assert result.used == pytest.approx(720 + 168)
    assert result.rate_per_hour == pytest.approx(1.0)
    assert result.projected_unused == pytest.approx(1500 - 888 - 480)
    assert result.projected_exhaustion is None


def test_projected_exhaustion_falls_inside_the_period_at_the_trailing_rate():
    now = START + timedelta(days=10)
    result = burndown(start=START, end=END, committed=600.0, usage=flat(1.0, START, now), now=now)
    # 240 used, 360 left at 1 GPU-h/h: runs out 360 hours after now.
    assert result.projected_exhaustion == now + 360 * H


def test_history_before_the_period_feeds_the_rate_but_not_the_usage():
    now = START + timedelta(days=1)
    usage = flat(4.0, START - timedelta(days=6), now)
    result = burndown(start=START, end=END, committed=5000.0, usage=usage, now=now,
                      history_start=START - timedelta(days=30))
    assert result.used == pytest.approx(96.0)
    assert result.rate_per_hour == pytest.approx(4.0)


def test_without_history_the_rate_comes_from_the_period_so_far():
    now = START + timedelta(hours=12)
    result = burndown(start=START, end=END, committed=5000.0, usage=flat(3.0, START, now), now=now)
    assert result.rate_per_hour == pytest.approx(3.0)


def test_at_the_very_start_there_is_no_rate_and_the_forecast_is_flat():
    result = burndown(start=START, end=END, committed=100.0, usage={}, now=START)
    assert result.rate_per_hour == 0.0
    assert result.forecast[-1] == 100.0
    assert result.projected_exhaustion is None


def test_the_band_is_the_forecasts_calibrated_spread_around_the_trailing_rate():
    now = START + timedelta(days=14)
    usage = {}
    for day in range(14):
        total = 48.0 if day % 2 else 24.0  # alternate days of 1 and 2 GPUs
        usage |= flat(total / 24, now - timedelta(days=day + 1), now - timedelta(days=day))
    result = burndown(start=START, end=END, committed=1000.0, usage=usage, now=now)
    assert result.rate_per_hour == pytest.approx((4 * 24 + 3 * 48) / 168)
    spread = forecast.spread_of(forecast.daily_totals(usage, now, START))
    assert result.spread == spread and spread.scale == pytest.approx(
        (forecast.SCALE_FLOOR ** 2 + (1 / 3) ** 2) ** 0.5)  # 24 and 48: sd 12 about 36
    left = (END - now).total_seconds() / 3600
    least, most = spread.band(result.rate_per_hour, left)
    remaining = 1000.0 - result.used
    assert result.forecast_p10[-1] == pytest.approx(remaining - most)
    assert result.forecast_p90[-1] == pytest.approx(remaining - least)


def test_usage_after_now_is_ignored():
    now = START + timedelta(days=2)
    usage = flat(1.0, START, END)
    result = burndown(start=START, end=END, committed=1000.0, usage=usage, now=now)
    assert result.used == pytest.approx(48.0)


def test_a_closed_period_ends_at_committed_minus_used_and_forecasts_nothing():
    usage = flat(1.5, START, END)
    result = burndown(start=START, end=END, committed=1000.0, usage=usage, now=END + H)
    assert result.remaining[-1] == pytest.approx(1000 - 1080)
    assert result.forecast[:-1] == [None] * (len(result.points) - 1)
    assert result.projected_used == pytest.approx(1080.0)
    assert result.projected_exhaustion == START + (1000 / 1.5) * H


hourly_usage = st.lists(st.floats(min_value=0, max_value=64, allow_nan=False), min_size=1,
                        max_size=24 * 40)


@settings(max_examples=examples(60), deadline=None)
@given(values=hourly_usage, committed=st.floats(min_value=0, max_value=50_000),
       elapsed=st.integers(min_value=0, max_value=24 * 40))
def test_burn_down_invariants(values, committed, elapsed):
    start = START
    end = START + timedelta(days=30)
    now = start + elapsed * H
    usage = {start + k * H: v for k, v in enumerate(values)}
    result = burndown(start=start, end=end, committed=committed, usage=usage, now=now)
    counted = sum(v for k, v in enumerate(values) if start + k * H < min(now, end))
    assert result.used == pytest.approx(counted)
    assert result.ideal[0] == committed and result.ideal[-1] == pytest.approx(0.0, abs=1e-6)
    actual = [r for r in result.remaining if r is not None]
    assert actual[0] == committed
    assert actual[-1] == pytest.approx(committed - counted)
    assert all(a >= b - 1e-9 for a, b in zip(actual, actual[1:], strict=False))
    for low, mid, high in zip(result.forecast_p10, result.forecast, result.forecast_p90,
                              strict=True):
        if mid is not None:
            assert low <= mid + 1e-9 <= high + 2e-9
    if now < end:
        assert result.forecast[-1] == pytest.approx(committed - result.projected_used)
    assert result.projected_used >= result.used - 1e-9


def _trailing_rate_by_definition(usage, now, history_start):
    start = max(now - timedelta(days=7), history_start)
    window_hours = (now - start).total_seconds() / 3600
    if window_hours <= 0:
        return 0.0
    return sum(v for hour, v in usage.items() if start <= hour < now) / window_hours


@settings(max_examples=examples(200), deadline=None)
@given(hours=st.integers(min_value=0, max_value=24 * 12),
       history=st.integers(min_value=0, max_value=24 * 12),
       minute=st.integers(min_value=0, max_value=59),
       values=st.lists(st.floats(min_value=0, max_value=64, allow_nan=False), min_size=1,
                       max_size=24 * 12))
def test_the_trailing_rate_is_the_windows_sum_over_its_hours(hours, history, minute,
                                                                     values):
    now = datetime(2026, 12, 3, 4, minute, tzinfo=UTC)
    first = now.replace(minute=0) - timedelta(hours=hours)
    usage = {first + timedelta(hours=k): values[k % len(values)] for k in range(hours + 2)}
    history_start = now - timedelta(hours=history)
    assert trailing_rate(usage, now, history_start) == _trailing_rate_by_definition(
        usage, now, history_start)


def test_the_commitment_runs_out_within_the_bands_range_of_dates():
    now = START + timedelta(days=14)
    usage = {}
    for day in range(14):
        usage |= flat((30.0 if day % 3 else 60.0) / 24, START + timedelta(days=day),
                      START + timedelta(days=day + 1))
    result = burndown(start=START, end=END, committed=1000.0, usage=usage, now=now)
    earliest, latest = result.exhaustion_range
    assert earliest is not None and earliest < result.projected_exhaustion
    assert latest is None or result.projected_exhaustion < latest
    spent = burndown(start=START, end=END, committed=100.0, usage=usage, now=now)
    assert spent.exhaustion_range == (spent.projected_exhaustion,) * 2  # it ran out already
