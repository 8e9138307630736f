"""The burn-down's band (loans.maths.forecast): calibrated on a team's own errors, it holds the
future four times in five on series whose future is drawn from a known law."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import forecast
from loans.models import Tenant
from loans.services.ledger.forecasting import fleet_prior
from metering.models import TenantHour
from tests.tiers import examples

HISTORY, LONGEST = 42, 28
DRAWS = 400


def series(family: str, rng: random.Random, size: float) -> list[float]:
    """Daily GPU-hours around 100 a day: `size` is the noise (iid), the level's step a day
    (walk) or the trend a day (trend), each as a share of 100."""
    days, level = [], 100.0
    slope = rng.uniform(-size, size) * 100
    for k in range(HISTORY + LONGEST):
        if family == "iid":
            value = rng.gauss(100, size * 100)
        elif family == "walk":
            level = max(5.0, level + rng.gauss(0, size * 100))
            value = level + rng.gauss(0, 10)
        else:
            value = 100 + slope * k + rng.gauss(0, 15)
        days.append(max(0.0, value))
    return days


@settings(max_examples=examples(12), deadline=None)
@given(family_and_size=st.one_of(
           st.tuples(st.just("iid"), st.floats(0.05, 0.4)),
           st.tuples(st.just("walk"), st.floats(0.0, 0.01)),  # the level moves up to 1% a day
           st.tuples(st.just("trend"), st.floats(0.0, 0.005))),  # up to 0.5% a day
       seed=st.integers(0, 2**32 - 1))
def test_the_band_holds_the_future_70_to_90_percent_of_the_time(family_and_size, seed):
    """Six weeks of history, then a horizon of 1 to 28 days: over DRAWS futures the realised
    use falls inside P10-P90 between 70% and 90% of the time (a calibrated band: 80%)."""
    family, size = family_and_size
    rng = random.Random(seed)
    inside = 0
    for _ in range(DRAWS):
        days = series(family, rng, size)
        horizon = rng.randint(1, LONGEST)
        history, future = days[:HISTORY], days[HISTORY:HISTORY + horizon]
        low, high = forecast.spread_of(history).band(sum(history[-7:]) / 7 / 24, horizon * 24)
        inside += low <= sum(future) <= high
    assert 0.70 <= inside / DRAWS <= 0.90, (family, size, inside / DRAWS)


def test_independent_days_fit_their_own_noise_and_the_weeks_error_as_a_level():
    """Days of sd 20% about 100: the error a day adds is a day's variance, 0.04 days of use
    squared; what every day of the horizon shares is the trailing week's error, 0.04 / 7."""
    rng = random.Random(3)
    spread = forecast.spread_of([rng.gauss(100, 20) for _ in range(56)])
    assert spread.own and 0.02 < spread.iid < 0.06
    assert forecast.LEAST_LEVEL * spread.iid <= spread.level < 0.03


def test_a_team_with_little_history_gets_the_pooled_prior_and_a_flat_one_no_band():
    assert forecast.spread_of([100.0] * (forecast.MIN_DAYS - 1)) == forecast.PRIOR
    flat = forecast.spread_of([100.0] * 30)
    assert flat.own and flat.band(10.0, 240) == (2400.0, 2400.0)


def test_the_band_is_never_below_zero_and_widens_with_the_horizon():
    spread = forecast.Spread(iid=0.5, level=0.3)
    assert forecast.Spread(iid=2.0, level=1.0).band(1.0, 24 * 20)[0] == 0.0
    widths = [spread.band(4.0, hours)[1] - spread.band(4.0, hours)[0]
              for hours in (1, 24, 240, 720)]
    assert widths == sorted(widths) and widths[0] > 0
    assert spread.band(4.0, 0) == (0.0, 0.0)


def test_a_horizon_the_smooth_fit_runs_under_keeps_what_was_measured_there():
    spread = forecast.Spread(iid=0.01, level=0.001, measured=(0.5, 0.1))
    assert spread.relative_sd(1) == pytest.approx(0.5 ** 0.5)
    assert spread.relative_sd(0.5) == pytest.approx((0.5 * 0.5) ** 0.5)  # a share of a day
    assert spread.relative_sd(3) == pytest.approx((0.03 + 0.009) ** 0.5)  # past what it measured


def test_daily_totals_are_whole_days_back_from_now_within_the_calibration_window():
    now = datetime(2026, 12, 4, 6, 30, tzinfo=UTC)
    usage = {now.replace(minute=0) - timedelta(hours=k): 1.0 for k in range(24 * 70)}
    totals = forecast.daily_totals(usage, now, None)
    assert len(totals) == forecast.CALIBRATION.days and set(totals) == {24.0}
    assert forecast.daily_totals(usage, now, now - timedelta(days=3, hours=5)) == [24.0] * 3


@pytest.mark.parametrize(("days_left", "share"), [(29, forecast.COVERAGE[0][1]),
                                                  (16, forecast.COVERAGE[0][1]),
                                                  (15.9, forecast.COVERAGE[1][1]),
                                                  (0.5, forecast.COVERAGE[2][1])])
def test_the_measured_coverage_is_read_by_days_left(days_left, share):
    assert forecast.coverage(days_left) == share


def test_the_fleets_errors_pooled_start_a_team_without_history():
    rng = random.Random(5)
    teams = [[rng.gauss(100, 30) for _ in range(40)] for _ in range(forecast.MIN_TEAMS)]
    fleet = forecast.pooled(teams)
    assert fleet is not None and not fleet.own and fleet != forecast.PRIOR
    assert forecast.spread_of([50.0] * 3, fleet) == fleet  # three days: the fleet's
    assert forecast.pooled(teams[:-1]) is None  # too few teams to pool: PRIOR stays
    assert forecast.pooled([[0.0] * 40] * 5) is None  # teams that used nothing tell nothing


def test_the_fleet_prior_is_read_from_every_tenants_days_once_a_day(db,
                                                                    django_assert_num_queries):
    now = datetime(2026, 12, 4, 9, tzinfo=UTC)
    midnight = now.replace(hour=0)
    rng = random.Random(8)
    rows = []
    for k in range(forecast.MIN_TEAMS):
        tenant = Tenant.objects.create(slug=f"t{k}", name=f"T{k}")
        for day in range(30):
            level = rng.gauss(100, 25) * 3600 / 24
            rows += [TenantHour(tenant=tenant,
                                hour=midnight - timedelta(days=30 - day) + timedelta(hours=h),
                                allocated_gpu_s=level, busy_gpu_s=0, peak_gpus=1,
                                sample_count=1) for h in range(24)]
    TenantHour.objects.bulk_create(rows)
    cache.clear()
    spread = fleet_prior(now)
    assert not spread.own and spread != forecast.PRIOR
    with django_assert_num_queries(0):  # cached for the day
        assert fleet_prior(now + timedelta(hours=3)) == spread
