"""The burn-down's band (loans.maths.forecast): the fleet's errors, scaled per team, hold the
period's outcome 70-90% of the time and are no wider than 4 mean absolute errors, on fixed,
seeded draws of the laws the Monte Carlo test names."""

import math
import random

import pytest

from bench import fleets
from loans.maths import forecast

PERIOD = 30


def law(shape: str, rng: random.Random, days: int) -> list[float]:
    """Daily GPU-hours: independent days about 100 (sd 25), or a straight trend (-0.4 to 0.8 a
    day) with noise (sd 15), as bench/forecast.py's laws."""
    slope, out = rng.uniform(-0.4, 0.8), []
    for day in range(days):
        value = rng.gauss(100, 25) if shape == "iid" else 100 + slope * day + rng.gauss(0, 15)
        out.append(max(0.0, value))
    return out


def replay(teams: list[list[float]], first: int, new: bool) -> dict[str, list[tuple]]:
    """At every midnight from day 3 of the period [first, first + PERIOD), each team's band
    for the period's end, with the fleet's band of that midnight: (low, high, point, outcome)
    by horizon bucket. A new team's history starts at the period, a seasoned one's at day 0."""
    found: dict[str, list[tuple]] = {name: [] for _least, name in forecast.BUCKETS}
    history = first if new else 0
    for day in range(3, PERIOD):
        now = first + day
        windows = [days[max(history, now - 56):now] for days in teams]
        fleet = forecast.pooled(windows)
        for days, seen in zip(teams, windows, strict=True):
            outcome = sum(days[first:first + PERIOD])
            if outcome <= 0:
                continue
            used, left = sum(days[first:now]), PERIOD - day
            mean = forecast.trailing_mean(forecast.from_first_use(seen))
            low, high = forecast.spread_of(seen, fleet).band(mean / 24, left * 24)
            found[forecast.bucket(left)].append((used + low, used + high, used + left * mean,
                                                 outcome))
    return found


# The laws: bench/fleets.py's young fleet (16 teams, level shifts, idle spells, lumpy small
# teams), new at the period's start and seasoned (56 days before it); fleets of 16 teams of
# independent days and of trends, seasoned, and of trends new. Their misses on the bench
# (a walking level as a new team, at 60-66%) are not claimed here.
LAWS = [("young fleet", True), ("young fleet", False), ("iid", False), ("trend", False),
        ("trend", True)]
SEEDS = 8  # fleets a law: a fixed number of draws


def draws(name: str, new: bool) -> list[tuple[list[list[float]], int]]:
    rng = random.Random(f"{name}-{new}")
    if name == "young fleet":
        return [(fleets.fleet(seed, 56 + PERIOD), 0 if new else 56) for seed in range(SEEDS)]
    return [([law(name, rng, 56 + PERIOD) for _ in range(16)], 0 if new else 56)
            for _ in range(SEEDS)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "new"), LAWS)
def test_the_band_holds_70_to_90_percent_and_is_at_most_4_errors_wide(name, new):
    found: dict[str, list[tuple]] = {bucket: [] for _least, bucket in forecast.BUCKETS}
    for teams, first in draws(name, new):
        for bucket, rows in replay(teams, first, new).items():
            found[bucket] += rows
    for bucket, rows in found.items():
        inside = sum(low <= outcome <= high for low, high, _point, outcome in rows) / len(rows)
        width = sorted((high - low) / outcome for low, high, _p, outcome in rows)[len(rows) // 2]
        error = sum(abs(point - outcome) / outcome for _l, _h, point, outcome in rows) / len(rows)
        assert 0.70 <= inside <= 0.90, (name, new, bucket, inside)
        assert width <= 4 * error, (name, new, bucket, width / error)


def test_the_band_is_multiplicative_never_below_zero_and_widens_with_the_horizon():
    spread = forecast.PRIOR.scaled(0.5)
    low, high = spread.band(4.0, 240)
    assert 0 < low < 4.0 * 240 < high
    widths = [spread.band(4.0, hours)[1] - spread.band(4.0, hours)[0]
              for hours in (1, 24, 240, 720)]
    assert widths == sorted(widths) and widths[0] > 0
    assert spread.band(4.0, 0) == (0.0, 0.0) and spread.band(0.0, 240) == (0.0, 0.0)
    assert forecast.PRIOR.scaled(50.0).band(1.0, 480)[0] >= 0.0


def test_a_teams_scale_is_its_days_variation_never_under_the_floor():
    assert forecast.scale([100.0] * 20) == pytest.approx(forecast.SCALE_FLOOR)
    assert forecast.scale([50.0, 150.0] * 10) == pytest.approx(math.hypot(0.1, 0.5))
    assert forecast.scale([30.0]) == pytest.approx(math.hypot(0.1, forecast.UNKNOWN_CV))
    # Only the last SCALE_DAYS days count: a calm fortnight after a wild month is calm.
    assert forecast.scale([0.0, 500.0] * 20 + [100.0] * 14) == pytest.approx(0.1)


def test_a_team_counts_from_its_first_metered_day_not_the_windows_start():
    assert forecast.from_first_use([0.0, 0.0, 3.0, 0.0, 5.0]) == [3.0, 0.0, 5.0]
    assert forecast.from_first_use([0.0] * 4) == []
    rng = random.Random(2)
    young = [[rng.gauss(100, 10) for _ in range(20)] for _ in range(4)]
    padded = [[0.0] * 36 + days for days in young]  # the window before they were metered
    assert forecast.pooled(padded) == forecast.pooled(young)


def test_errors_are_scaled_log_ratios_and_an_idle_horizon_is_a_large_miss():
    days = [10.0, 10.0, 20.0, 0.0]
    found = {(o, h): s for o, h, s in forecast.scores(days)}
    unit = forecast.scale([10.0])  # one day seen: the unknown variation
    assert found[(1, 1)] == pytest.approx(0.0)  # 10 after a mean of 10
    assert found[(1, 2)] == pytest.approx(math.log(30 / 20) / unit)
    assert found[(3, 1)] == pytest.approx(forecast.IDLE / forecast.scale(days[:3]))
    assert (0, 1) not in found  # no day before it: no forecast


def test_a_young_fleets_short_horizons_stretch_the_priors_long_ones():
    calm = [(h, s) for h in (1, 2, 3) for s in (-0.1, 0.1) * 40]
    table = forecast.table(calm)
    assert table.own and table.low[0] == pytest.approx(-0.1) and table.high[2] == pytest.approx(0.1)
    # Horizon 4 has scores within SPAN of it (3): measured; past the last, the prior narrowed
    # as the fleet's widest measured horizon is, never by more than STRETCH.
    last = max(h for h in range(1, forecast.LONGEST + 1) if h / forecast.SPAN <= 3)
    ratio = max(0.1 / forecast.PRIOR.high[last - 1], 1 / forecast.STRETCH)
    assert table.high[-1] == pytest.approx(forecast.PRIOR.high[-1] * ratio * forecast.BEYOND)
    assert forecast.table([]) == forecast.PRIOR


def test_a_fleet_of_fewer_than_three_teams_with_errors_gets_the_prior():
    rng = random.Random(5)
    teams = [[rng.gauss(100, 30) for _ in range(40)] for _ in range(forecast.MIN_TEAMS)]
    fleet = forecast.pooled(teams)
    assert fleet.own and fleet.source == "fleet" and fleet != forecast.PRIOR
    assert forecast.pooled(teams[:-1]) == forecast.PRIOR
    assert forecast.pooled([[0.0] * 40] * 5) == forecast.PRIOR  # nothing used: no errors
    assert forecast.spread_of([50.0] * 3, fleet).low == fleet.low


def test_the_backtest_counts_every_team_origin_and_horizon_once():
    """Constant teams: every band is the forecast itself times exp(P x 0.1), and the outcome
    is the forecast, so every forecast is inside; each origin counts horizons up to 29 days
    or the window's end."""
    size, checked = 84, 28
    teams = [[100.0] * size, [0.0] * 70 + [40.0] * 14]  # the second metered late
    found = forecast.backtest(teams, checked=checked)
    expected: dict[str, int] = {}
    for origin in range(size - checked, size):
        for days in teams:
            if not any(days[:origin]):
                continue
            for horizon in range(1, min(forecast.LONGEST_LEFT, size - origin) + 1):
                key = forecast.bucket(horizon)
                expected[key] = expected.get(key, 0) + 1
    assert {k: c.forecasts for k, c in found.items() if c.forecasts} == expected
    assert all(c.inside == c.forecasts for c in found.values())


def test_a_shift_the_band_did_not_foresee_is_counted_outside():
    teams = [[100.0] * 70 + [400.0] * 14 for _ in range(3)]
    found = forecast.backtest(teams, checked=28)
    short = found["<=7"]
    assert short.forecasts > 0 and short.inside < short.forecasts
    assert forecast.Coverage(60, 100).in_ten == 6 and forecast.Coverage(6, 10).share is None
