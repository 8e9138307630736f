"""The advice's maths run on arrays (the daily job prices a thousand contracts): each result is
the same float, to the last bit, as the plain loop it replaced, written out here as the
model. So vectorising changed the job's time and nothing it advises."""

import math
import random
import statistics
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import quotas, recommend
from tests.tiers import examples

usage = st.floats(min_value=0, max_value=1e5, allow_nan=False, allow_infinity=False)
rates = st.tuples(st.sampled_from(["10", "18", "7.25"]), st.sampled_from(["1.2", "1.5", "3"]))


def model_windows(hourly, period_hours, lookback_days):
    span = lookback_days * 24
    if len(hourly) < max(span, period_hours):
        return []
    recent = hourly[-span:] if span >= period_hours else hourly[-period_hours:]
    prefix = [0.0]
    for value in recent:
        prefix.append(prefix[-1] + value)
    return [prefix[i + period_hours] - prefix[i]
            for i in range(0, len(recent) - period_hours + 1, 24)]


def model_curve(values, candidates, rc, ro):
    out = []
    for c in candidates:
        costs = [c * float(rc) + max(0.0, u - c) * float(ro) for u in values]
        out.append((c, statistics.fmean(costs), recommend.quantile(costs, 0.1),
                    recommend.quantile(costs, 0.9)))
    return out


@settings(max_examples=examples(200))
@given(st.lists(usage, min_size=24, max_size=24 * 20), st.sampled_from([24, 48, 24 * 7]),
       st.integers(min_value=1, max_value=20))
def test_windows_are_the_running_sums_of_the_loop(hourly, period_hours, days):
    assert recommend.period_windows(hourly, period_hours, days) == model_windows(
        hourly, period_hours, days)


@settings(max_examples=examples(200))
@given(st.lists(usage, min_size=1, max_size=200), st.lists(usage, min_size=1, max_size=8),
       rates)
def test_the_cost_curve_is_the_loops(values, candidates, pair):
    rc = Decimal(pair[0])
    ro = rc * Decimal(pair[1])
    got = [(p.commitment, p.expected, p.p10, p.p90)
           for p in recommend.cost_curve(values, candidates, rc, ro)]
    assert got == model_curve(values, candidates, rc, ro)


@settings(max_examples=examples(100))
@given(st.lists(usage, min_size=12, max_size=12 * 30), st.integers(min_value=1, max_value=12),
       st.floats(min_value=0, max_value=1e3), st.lists(usage, min_size=1, max_size=4), rates)
def test_term_totals_and_expected_cost_are_the_loops(outcomes, months, error, commitments,
                                                     pair):
    block = len(outcomes) // months
    outcomes = outcomes[:block * months]
    advice = recommend.TermAdvice(Decimal(0), months, 0.0, [0.0] * months, [0.0] * months,
                                  [0.0] * months, outcomes=outcomes, level_error=error)
    rc = Decimal(pair[0])
    ro = rc * Decimal(pair[1])
    named = {f"c{k}": c for k, c in enumerate(commitments)}
    # The model: the paths drawn as the advice draws them, each total a plain sum.
    rng = random.Random(recommend.TOTAL_SEED)
    paths = []
    for _ in range(recommend.TOTAL_DRAWS):
        shift = rng.gauss(0.0, error) if error else 0.0
        paths.append([max(0.0, outcomes[j * block + rng.randrange(block)] + shift)
                      for j in range(months)])
    expected = {}
    for name, c in named.items():
        totals = sorted(months * c * float(rc) + float(ro) * sum(u - c for u in path if u > c)
                        for path in paths)
        expected[name] = tuple(recommend.quantile(totals, q) for q in (0.1, 0.5, 0.9))
    assert advice.totals(named, rc, ro) == expected
    for c in commitments:
        mean = statistics.fmean([c * float(rc) + float(ro) * max(0.0, u - c) for u in outcomes])
        assert advice.expected_total(c, rc, ro) == mean * months


@settings(max_examples=examples(200))
@given(st.lists(st.floats(min_value=0, max_value=512), min_size=1, max_size=300),
       st.lists(st.floats(min_value=0, max_value=3), min_size=1, max_size=12),
       st.floats(min_value=0, max_value=0.5), st.integers(min_value=0, max_value=600))
def test_quotas_read_the_same_pooled_demand(peaks, growth, share, base):
    pooled = sorted(p * g for g in growth for p in peaks)
    allowed = math.floor(share * len(pooled) + 1e-9)
    want = 0 if allowed >= len(pooled) else max(
        0, math.ceil(pooled[len(pooled) - allowed - 1] - 1e-9))
    assert quotas.base_for_bursts(peaks, growth, share) == want
    above = sum(1 for g in growth for p in peaks if p * g > base + 1e-9)
    assert quotas.share_above(peaks, growth, base) == above / (len(peaks) * len(growth))
