"""The rule that turns a contract's terms and overage policy into GPU-minute budgets
(loans.maths.admission), against a brute-force model of a period: jobs admitted the way Slurm's
`safe` enforcement admits them (a job starts in a QOS only if its time limit x GPUs fits what
is left), priced with the ledger's own cost."""

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import admission, billing
from loans.schedulers.slurm.budgets import Account, Qos, Wanted, plan
from tests.tiers import examples

CURRENCIES = ("CNY", "JPY", "KWD", "USD")


def admitted(jobs, limits: admission.Budgets) -> tuple[int, int]:
    """GPU-minutes used in the commitment's QOS and in the overage QOS: each job (GPUs, time
    limit, minutes it ran) runs in the commitment's QOS if it fits there, else in the overage
    QOS (where gpuloans moves it) if it fits there, else never starts."""
    commitment = overage = 0
    for gpus, limit, ran in jobs:
        if commitment + gpus * limit <= limits.commitment_minutes:
            commitment += gpus * min(ran, limit)
        elif limits.overage_minutes is None or overage + gpus * limit <= limits.overage_minutes:
            overage += gpus * min(ran, limit)
    return commitment, overage


@settings(max_examples=examples(300), deadline=None)
@given(committed=st.decimals(0, 5000, places=2), rate=st.decimals(0, 40, places=4),
       currency=st.sampled_from(CURRENCIES),
       policy=st.sampled_from([admission.ALLOW, admission.BUDGET, admission.HOLD]),
       budget=st.decimals(0, 20000, places=4),
       jobs=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 600), st.integers(0, 600)),
                     max_size=60))
def test_the_money_billed_never_passes_the_policys_limit(committed, rate, currency, policy,
                                                         budget, jobs):
    terms = billing.Terms(base_quota_gpus=1, max_quota_gpus=8, committed_gpu_hours=committed,
                          committed_rate=Decimal("10"), overage_rate=rate, term_months=12,
                          currency=currency)
    limits = admission.budgets(committed_gpu_hours=committed, overage_rate=rate, policy=policy,
                               budget=budget if policy == admission.BUDGET else None)
    in_commitment, in_overage = admitted(jobs, limits)
    cost = terms.cost(billing.gpu_hours(Decimal(in_commitment + in_overage) / 60))
    assert in_commitment <= committed * 60  # Slurm's count never passes the commitment
    if policy == admission.HOLD:
        assert in_overage == 0 and cost.overage_cost == 0
    elif policy == admission.BUDGET and rate > 0:
        # Rounded to the minor unit, at most one unit off from the budget's own rounding.
        assert cost.overage_cost <= billing.money(budget, currency) + billing.minor_unit(
            currency)
        # ... and no whole GPU-minute more would still have fit: the budget is not wasted.
        assert (limits.overage_minutes + 1) * rate > budget * 60
    else:
        assert limits.overage_minutes is None  # allow, or a budget at no cost: no limit
        assert in_commitment + in_overage == sum(g * min(r, t) for g, t, r in jobs)  # all ran


def test_a_budget_that_buys_whole_minutes_exactly_gets_every_one():
    """7.2704 at 0.0006 a GPU-hour buys 727,040 GPU-minutes exactly; worked out as
    budget / rate in 28 digits and then times 60, it came to 727,039.99... and lost one."""
    limits = admission.budgets(committed_gpu_hours=Decimal(0), overage_rate=Decimal("0.0006"),
                               policy=admission.BUDGET, budget=Decimal("7.2704"))
    assert limits.overage_minutes == 727_040


def test_the_commitment_is_its_whole_gpu_minutes_rounded_down():
    limits = admission.budgets(committed_gpu_hours=Decimal("10.01"),
                               overage_rate=Decimal("12"), policy=admission.BUDGET,
                               budget=Decimal("100"))
    assert (limits.commitment_minutes, limits.overage_minutes) == (600, 500)
    assert limits.overage_gpu_hours() == Decimal(500) / 60


@pytest.mark.parametrize(("policy", "budget", "message"), [
    (admission.BUDGET, None, "needs a budget"), (admission.BUDGET, Decimal(-1), "needs a budget"),
    ("stop", None, "unknown overage policy")])
def test_a_policy_that_cannot_be_read_is_refused(policy, budget, message):
    with pytest.raises(ValueError, match=message):
        admission.budgets(committed_gpu_hours=Decimal(1), overage_rate=Decimal(1), policy=policy,
                          budget=budget)


def test_the_slurm_plan_adds_resets_and_moves_only_what_it_must():
    want = Wanted("team-a", 1, "gpuloans period 2026-12-01T00:00Z",
                  admission.Budgets(commitment_minutes=600, overage_minutes=None))
    fresh = plan([want], {}, {"team-a": Account(frozenset({"normal"}), "normal", ())})
    assert [c.what for c in fresh] == [
        "QOS gpuloans-commit-team-a added: 600 GPU-minutes",
        "QOS gpuloans-overage-team-a added: no limit",
        "default QOS normal -> gpuloans-commit-team-a, given gpuloans-commit-team-a, "
        "gpuloans-overage-team-a"]
    assert "Flags=NoDecay" in fresh[0].command and "GrpTRESMins=gres/gpu=-1" in fresh[1].command
    carried = {"gpuloans-commit-team-a": Qos(600, want.period.lower()),
               "gpuloans-overage-team-a": Qos(None, want.period.lower())}
    names = frozenset(carried) | {"normal"}
    assert plan([want], carried, {"team-a": Account(names, "gpuloans-commit-team-a", ())}) == []
    waiting = Account(names, "gpuloans-commit-team-a", (("41", "gpuloans-commit-team-a"),))
    assert [c.command for c in plan([want], carried, {"team-a": waiting})][-1] == (
        "scontrol", "update", "JobId=41", "QOS=gpuloans-overage-team-a")
    held = Wanted("team-a", 1, want.period, admission.Budgets(600, 0))
    assert not [c for c in plan([held], {**carried, "gpuloans-overage-team-a": Qos(
        0, want.period)}, {"team-a": waiting}) if c.command[0] == "scontrol"]
    later = Wanted("team-a", 1, "gpuloans period 2027-01-01T00:00Z", want.limits)
    assert [c.what for c in plan([later], carried, {"team-a": waiting})] == [
        "QOS gpuloans-commit-team-a: use reset for period 2027-01-01T00:00Z",
        "QOS gpuloans-overage-team-a: use reset for period 2027-01-01T00:00Z"]


def test_without_a_contract_the_plan_takes_back_only_what_gpuloans_set():
    ended = Wanted("team-a", 1, "", None)
    ours = {"gpuloans-commit-team-a": Qos(600, "x"), "gpuloans-overage-team-a": Qos(None, "x")}
    account = Account(frozenset(ours) | {"normal", "by-hand"}, "gpuloans-overage-team-a",
                      (("7", "gpuloans-overage-team-a"),))
    assert [c.command for c in plan([ended], ours, {"team-a": account})] == [
        ("scontrol", "update", "JobId=7", "QOS=normal"),
        ("sacctmgr", "-i", "modify", "account", "where", "name=team-a", "set",
         "QOS-=gpuloans-commit-team-a,gpuloans-overage-team-a", "DefaultQOS=normal"),
        ("sacctmgr", "-i", "delete", "qos", "gpuloans-commit-team-a"),
        ("sacctmgr", "-i", "delete", "qos", "gpuloans-overage-team-a")]
    untouched = Account(frozenset({"normal", "by-hand"}), "by-hand", ())
    assert plan([ended], {}, {"team-a": untouched}) == []  # nothing of ours: nothing changed
