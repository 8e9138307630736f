"""Contracts into Slurm's limits (apply_quotas --slurm), against a real Slurm with slurmdbd that
enforces them (tests/slurm.py): set, changed and removed as contracts and bursts change, never
changed twice, and a job over its account's limit is held back by Slurm itself."""

import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from loans.models import BurstRequest, Contract, Plan, SlurmAccountHold, SlurmLimitChange
from loans.schedulers.slurm.limits import Carried, Held, Wanted, apply_limits, plan
from loans.services.ledger.amendments import amend
from metering.models import AttributionRule, Cluster


def test_the_plan_changes_only_what_differs():
    wants = [Wanted("team-a", 1, 4), Wanted("team-b", 2, 3), Wanted("gone", 3, 1),
             Wanted("free", 4, None), Wanted("ours", 5, None), Wanted("hand", 6, None)]
    now = {"team-a": Carried(4, frozenset()), "team-b": Carried(8, frozenset()),
           "free": Carried(5, frozenset()), "ours": Carried(2, frozenset()),
           "hand": Carried(9, frozenset({"gpuloans-burst-hand"}))}
    held = {"team-b": Held(None, 2), "ours": Held(None, 2), "hand": Held(7, 2)}
    changes = plan(wants, now, {"gpuloans-burst-hand"}, held)
    assert [(c.account, c.what) for c in changes] == [
        ("team-b", "GrpTRES gres/gpu 8 -> 3"),
        ("gone", "missing in Slurm: add the account (sacctmgr add account) and its users"),
        # "free" was never held: its hand-set 5 stays. "hand" was changed by hand since.
        ("ours", "GrpTRES gres/gpu 2 -> none (no contract runs: the limit from before)"),
        ("hand", "burst QOS gpuloans-burst-hand taken back"),
        ("hand", "burst QOS gpuloans-burst-hand removed")]
    assert changes[2].command[-1] == "GrpTRES=gres/gpu=-1"  # -1 clears a limit
    assert plan(wants[:1], now, set(), {}) == []
    [first] = plan([Wanted("free", 4, 2)], now, set(), {})
    assert first.what == "GrpTRES gres/gpu 5 -> 2 (the contract's; 5 kept)"


def qos_of(slurm) -> dict[str, str]:
    out = slurm.command("sacctmgr", "-n", "-P", "show", "qos", "format=Name,GrpTRES").stdout
    return dict(line.split("|", 1) for line in out.splitlines())


def account_of(slurm, account: str) -> tuple[str, str]:
    out = slurm.command("sacctmgr", "-n", "-P", "show", "assoc", f"account={account}",
                        "format=User,GrpTRES,QOS").stdout
    [row] = [line.split("|") for line in out.splitlines() if line.split("|")[0] == ""]
    return row[1], row[2]


@pytest.fixture
def hpc(transactional_db, tenant, other_tenant, slurm, monkeypatch):
    """Tenant vision is account team-a, speech is team-b, in the Slurm cluster; vision has a
    contract with a 2-GPU cap running now."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])  # as a Slurm client's would
    for account in ("team-a", "team-b"):  # as an earlier test may have left them
        slurm.command("sacctmgr", "-i", "modify", "account", "where", f"name={account}", "set",
                      "GrpTRES=gres/gpu=-1", "QOS=normal", "DefaultQOS=normal")
    for name in qos_of(slurm):
        if name.startswith("gpuloans-burst-"):
            slurm.command("sacctmgr", "-i", "delete", "qos", name)
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    AttributionRule.objects.create(tenant=other_tenant, cluster=cluster, value="team-b",
                                   field=AttributionRule.Field.ACCOUNT)
    small = Plan.objects.create(
        name="H100 2", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=1, max_quota_gpus=2,
        committed_gpu_hours=Decimal("100"), committed_rate=Decimal("10.00"), term_months=12,
        currency="CNY")
    today = timezone.localdate()
    contract = Contract(tenant=tenant, plan=small, starts_on=today.replace(day=1),
                        time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    yield cluster, contract
    slurm.cancel_all()


def test_contracts_become_account_limits_that_slurm_enforces(hpc, slurm, operator):
    cluster, contract = hpc
    out = io.StringIO()
    call_command("apply_quotas", "--slurm", "--dry-run", stdout=out)
    assert ("sacctmgr -i modify account where name=team-a set GrpTRES=gres/gpu=1"
            in out.getvalue())
    assert account_of(slurm, "team-a")[0] == ""  # a dry run changes nothing
    assert not SlurmLimitChange.objects.exists()

    call_command("apply_quotas", "--slurm", stdout=io.StringIO())
    assert account_of(slurm, "team-a")[0] == "gres/gpu=1"  # the base: no burst is granted
    assert account_of(slurm, "team-b")[0] == ""  # speech has no contract: no limit
    [logged] = SlurmLimitChange.objects.all()
    assert (logged.account, logged.change, logged.succeeded) == (
        "team-a", "GrpTRES gres/gpu none -> 1 (the contract's; none kept)", True)
    again = io.StringIO()
    call_command("apply_quotas", "--slurm", stdout=again)
    assert "carries its contract already" in again.getvalue()
    assert SlurmLimitChange.objects.count() == 1

    # Slurm itself holds back the second 1-GPU job: the quota is the base until a burst is
    # granted, whatever QOS a job asks for (before, the max quota let both run).
    slurm.cancel_all()
    slurm.sbatch("-A", "team-a", "--gres=gpu:1")
    waiting = slurm.command("sbatch", "--parsable", "-A", "team-a", "--gres=gpu:1", "-c1",
                            "-o", "/dev/null", "--wrap", "sleep 60").stdout.strip()
    slurm._until(lambda: slurm.command("squeue", "-h", "-j", waiting, "-o", "%r").stdout.strip()
                 == "AssocGrpGRES", "the job over the limit to wait for it")
    assert slurm.state(waiting) == "PENDING"
    assert slurm.sbatch("-A", "team-b", "--gres=gpu:2")  # no limit on speech's account


def test_a_burst_raises_the_account_limit_while_it_lasts_and_an_amendment_changes_the_base(
        hpc, slurm, lead):
    cluster, contract = hpc
    slurm.command("sacctmgr", "-i", "add", "qos", "gpuloans-burst-team-a",
                  "GrpTRES=gres/gpu=1")  # as an earlier version left it
    slurm.command("sacctmgr", "-i", "modify", "account", "where", "name=team-a", "set",
                  "QOS+=gpuloans-burst-team-a")
    now = timezone.now()
    burst = BurstRequest.objects.create(
        contract=contract, gpus=1, starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(hours=1), reason="deadline", state=BurstRequest.State.GRANTED,
        requested_by=lead, created_at=now - timedelta(hours=2))
    changes = apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=now, dry_run=False)
    assert [c.what for c in changes] == [
        "GrpTRES gres/gpu none -> 2 (the contract's; none kept)",
        "burst QOS gpuloans-burst-team-a taken back", "burst QOS gpuloans-burst-team-a removed"]
    assert account_of(slurm, "team-a") == ("gres/gpu=2", "normal")
    assert "gpuloans-burst-team-a" not in qos_of(slurm)
    slurm.cancel_all()
    first = slurm.sbatch("-A", "team-a", "--gres=gpu:1")
    second = slurm.sbatch("-A", "team-a", "--gres=gpu:1")  # the burst's GPU, no --qos asked
    assert {slurm.state(first), slurm.state(second)} == {"RUNNING"}
    slurm.cancel_all()

    # After the burst: the base again.
    later = burst.ends_at + timedelta(minutes=5)
    changes = apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=later, dry_run=False)
    assert [c.what for c in changes] == ["GrpTRES gres/gpu 2 -> 1"]

    # An amendment from the next period raises the base there.
    amend(contract=contract, changes={"base_quota_gpus": 2, "max_quota_gpus": 4},
          from_period=1, reason="growth", now=now)
    next_period = contract.period_at(now).end + timedelta(hours=1)
    apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=next_period, dry_run=False)
    assert account_of(slurm, "team-a")[0] == "gres/gpu=2"

    # Past the contract's end: the limit from before gpuloans held the account (none).
    after = contract.period_at(now).end
    while contract.period_at(after) is not None:
        after = contract.period_at(after).end
    apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=after + timedelta(days=1),
                 dry_run=False)
    assert account_of(slurm, "team-a")[0] == ""
    assert not SlurmAccountHold.objects.exists()


def test_hand_set_limits_are_kept_and_restored_and_others_never_touched(hpc, slurm):
    cluster, contract = hpc
    for account, gpus in (("team-a", 7), ("team-b", 5)):
        slurm.command("sacctmgr", "-i", "modify", "account", "where", f"name={account}", "set",
                      f"GrpTRES=gres/gpu={gpus}")
    now = timezone.now()
    apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=now, dry_run=False)
    assert account_of(slurm, "team-a")[0] == "gres/gpu=1"  # the contract's replaces it
    assert account_of(slurm, "team-b")[0] == "gres/gpu=5"  # no contract: never touched
    # Set by hand during the contract: the contract's limit again at the next run.
    slurm.command("sacctmgr", "-i", "modify", "account", "where", "name=team-a", "set",
                  "GrpTRES=gres/gpu=9")
    apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=now, dry_run=False)
    assert account_of(slurm, "team-a")[0] == "gres/gpu=1"
    # The contract ends: the hand-set 7 is back, and a later run changes nothing more.
    contract.status = Contract.Status.ENDED
    contract.save(update_fields=["status"])
    changes = apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=now, dry_run=False)
    assert [c.what for c in changes] == [
        "GrpTRES gres/gpu 1 -> 7 (no contract runs: the limit from before)"]
    assert account_of(slurm, "team-a")[0] == "gres/gpu=7"
    assert apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=now, dry_run=False) == []
    assert account_of(slurm, "team-b")[0] == "gres/gpu=5"


def test_apply_quotas_needs_slurm_and_names_a_missing_cluster(db):
    with pytest.raises(CommandError, match="quota_manifests"):
        call_command("apply_quotas")
    with pytest.raises(CommandError, match="no Slurm cluster"):
        call_command("apply_quotas", "--slurm")
    with pytest.raises(CommandError, match="No cluster named 'nope'"):
        call_command("apply_quotas", "--slurm", "--cluster", "nope")

