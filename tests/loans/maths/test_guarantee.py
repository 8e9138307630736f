"""The floor's measure against a brute-force model written here: every second of a short period
looked at on its own."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import guarantee
from loans.maths.guarantee import Request, Wait
from tests.tiers import examples

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SECONDS = 240  # the period, short enough to walk second by second


def at(second: int) -> datetime:
    return T0 + timedelta(seconds=second)


def spans(draw, *, most: int):
    out = []
    for _ in range(draw(st.integers(0, most))):
        a = draw(st.integers(-20, SECONDS + 20))
        b = draw(st.integers(a, SECONDS + 40))
        out.append((a, b))
    return out


OVERAGE = "gpuloans-overage-"
OVERAGE_QOS = OVERAGE + "a"


@st.composite
def requests(draw):
    """A job: submitted, perhaps eligible later (or never), perhaps started or cancelled,
    waiting for room or for something else, in the normal or the overage QOS."""
    submitted = draw(st.integers(-20, SECONDS + 10))
    eligible = draw(st.one_of(st.none(), st.integers(submitted, SECONDS + 20)))
    outcome = draw(st.sampled_from(["started", "cancelled", "waiting"]))
    until = draw(st.integers(submitted, SECONDS + 40))
    return (submitted, eligible, until if outcome == "started" else None,
            until if outcome == "cancelled" else None, draw(st.integers(1, 4)),
            draw(st.booleans()), draw(st.sampled_from(["normal", OVERAGE_QOS])))


@st.composite
def histories(draw):
    base = draw(st.integers(0, 4))
    jobs = draw(st.lists(requests(), max_size=6))
    # MIG instances hold sevenths of a GPU; whole GPUs one or two.
    shares = st.sampled_from([1 / 7, 2 / 7, 3 / 7, 0.5, 1.0, 2.0])
    held = [(a, b, draw(shares)) for a, b in spans(draw, most=8)]
    holds = spans(draw, most=2)
    return base, jobs, held, holds


NOW = SECONDS + 30  # a job still waiting waits until now


def brute_force(base, jobs, held, holds):
    """Second by second, from the jobs as recorded: a job waits at s when it asked for room,
    is outside the overage QOS, was eligible and had neither started nor been cancelled."""
    short_seconds, short_gpu_s = 0, 0.0
    for s in range(SECONDS):
        if any(a <= s < b for a, b in holds):
            continue
        waiting = sum(gpus for submitted, eligible, started, ended, gpus, room, qos in jobs
                      if room and qos != OVERAGE_QOS and eligible is not None
                      and max(submitted, eligible) <= s < (started if started is not None
                                                           else ended if ended is not None
                                                           else NOW))
        holding = sum(g for a, b, g in held if a <= s < b)
        short = min(waiting, base - holding)
        if short > 1e-9:
            short_seconds += 1
            short_gpu_s += short
    return short_seconds, short_gpu_s / 3600


def moment(second: int | None):
    return None if second is None else at(second)


@settings(max_examples=examples(400))
@given(histories())
def test_the_measure_equals_a_second_by_second_count(history):
    base, jobs, held, holds = history
    waits = [guarantee.wait_of(Request(f"j{k}", gpus, at(submitted), moment(eligible),
                                       moment(started), moment(ended), room, qos),
                               now=at(NOW), overage_qos=OVERAGE)
             for k, (submitted, eligible, started, ended, gpus, room, qos) in enumerate(jobs)]
    result = guarantee.measure(
        start=T0, end=at(SECONDS), base_quota=base, waits=[w for w in waits if w],
        held=[(at(a), at(b), g) for a, b, g in held],
        holds=[(at(a), at(b)) for a, b in holds])
    short_seconds, short_gpu_hours = brute_force(base, jobs, held, holds)
    assert result.seconds == SECONDS
    assert result.short_seconds == short_seconds
    assert result.short_gpu_hours == pytest.approx(short_gpu_hours, abs=1e-9)
    assert result.availability == pytest.approx(1 - short_seconds / SECONDS)


def test_the_issues_case_counts_one_short_gpu_for_both_waits():
    """Base 2, one GPU held; a 1-GPU job waits 10 minutes, a 2-GPU job beside it: min(3, 2 - 1)
    = 1 short GPU, never more."""
    result = guarantee.measure(
        start=T0, end=T0 + timedelta(hours=1), base_quota=2,
        waits=[Wait("2", 1, at(60), at(660)), Wait("3", 2, at(60), at(900))],
        held=[(T0, T0 + timedelta(hours=1), 1.0)])
    assert result.short_seconds == 840
    assert result.short_gpu_hours == pytest.approx(840 / 3600)
    assert result.availability == pytest.approx(1 - 840 / 3600)


def test_no_demand_is_full_availability_and_a_team_at_its_quota_is_not_short():
    nothing = guarantee.measure(start=T0, end=at(100), base_quota=4, waits=[])
    assert (nothing.short_seconds, nothing.availability) == (0, 1.0)
    at_quota = guarantee.measure(start=T0, end=at(100), base_quota=2,
                                 waits=[Wait("1", 1, T0, at(100))], held=[(T0, at(100), 2.0)])
    assert at_quota.short_seconds == 0


def request(**changes):
    fields = dict(job="7", gpus=1, submitted=at(0), eligible=at(30), started=at(90),
                  ended=at(200), capacity=True, qos="normal")
    return Request(**{**fields, **changes})


def test_a_wait_runs_from_eligible_to_start_and_only_for_room():
    assert guarantee.wait_of(request(), now=at(300)) == Wait("7", 1, at(30), at(90))
    assert guarantee.wait_of(request(capacity=False), now=at(300)) is None
    assert guarantee.wait_of(request(eligible=None), now=at(300)) is None
    assert guarantee.wait_of(request(gpus=0), now=at(300)) is None
    assert guarantee.wait_of(request(qos="gpuloans-overage-a"), now=at(300),
                            overage_qos="gpuloans-overage-") is None


def test_a_job_cancelled_while_waiting_counts_until_its_cancellation_one_waiting_until_now():
    assert guarantee.wait_of(request(started=None, ended=at(120)), now=at(300)) == \
        Wait("7", 1, at(30), at(120))
    assert guarantee.wait_of(request(started=None, ended=None), now=at(300)) == \
        Wait("7", 1, at(30), at(300))


@pytest.mark.parametrize("gpu_type, plan, cluster, counts", [
    ("h100", "H100", {"H100", "A100"}, True),  # mapped to the plan's model
    ("a100", "H100", {"H100"}, False),  # mapped to another
    ("", "H100", {"H100"}, True),  # untyped, one model in the cluster: the plan's
    ("", "H100", {"H100", "A100"}, False),  # untyped, two models: cannot tell
    ("gpu-x", "H100", {"H100"}, True),  # a type the setting does not name: as untyped
    ("a100", "", {"A100"}, True),  # the plan names no model
    ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", {"H100", "A100"}, True),  # its label
    ("NVIDIA-A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", {"H100", "A100"}, False),
])
def test_a_request_counts_for_the_plan_by_its_gpu_model(gpu_type, plan, cluster, counts):
    types = {"h100": "H100", "a100": "A100"}
    assert guarantee.counts_for(gpu_type=gpu_type, plan_model=plan, type_models=types,
                                cluster_models=cluster) is counts


def test_credit_tiers_take_the_largest_credit_below_whose_level_the_availability_is():
    tiers = guarantee.parse_tiers("95:10, 90:25")
    assert tiers == [(Decimal(95), Decimal(10)), (Decimal(90), Decimal(25))]
    assert guarantee.credit_pct(0.96, tiers) == 0
    assert guarantee.credit_pct(0.95, tiers) == 0
    assert guarantee.credit_pct(0.9499, tiers) == 10
    assert guarantee.credit_pct(0.80, tiers) == 25
    assert guarantee.credit_pct(0.5, []) == 0


@pytest.mark.parametrize("text, said", [
    ("95", "level:credit"), ("95:ten", "level:credit"), ("0:10", "above 0"),
    ("95:101", "at most 100"), ("95:10, 95:20", "same level"), ("95:25, 90:10", "smaller credit"),
    ("nan:10", "above 0"),
])
def test_bad_tiers_are_named(text, said):
    with pytest.raises(ValueError, match=said):
        guarantee.parse_tiers(text)
