"""Admission from the ledger on a real Slurm (tests/slurm.py: multifactor priority,
AccountingStorageEnforce=associations,limits,qos,safe): a contract's commitment and overage
policy as GPU-minute budgets that Slurm itself holds jobs to."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from loans.maths import admission
from loans.models import Contract, OveragePolicy, Plan, SlurmLimitChange
from loans.schedulers.protocol import Change
from loans.schedulers.slurm.limits import apply_limits
from metering.models import AttributionRule, Cluster

COMMIT, OVERAGE = "gpuloans-commit-team-a", "gpuloans-overage-team-a"


def reset(slurm) -> None:
    """team-a as an earlier test may have left it: no gpuloans QOS, the plain default."""
    slurm.cancel_all()
    slurm.command("sacctmgr", "-i", "modify", "account", "where", "name=team-a", "set",
                  "QOS=normal", "DefaultQOS=normal", "GrpTRES=gres/gpu=-1")
    for name in (COMMIT, OVERAGE):
        slurm.command("sacctmgr", "-i", "delete", "qos", name)


@pytest.fixture
def ten_hours(transactional_db, tenant, slurm, monkeypatch):
    """Tenant vision is account team-a, with a contract of 10 committed GPU-hours a period
    (600 GPU-minutes) at 12 CNY a GPU-hour of overage and a quota of 4 GPUs, running now."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    reset(slurm)
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    plan = Plan.objects.create(
        name="H100 10h", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=4,
        max_quota_gpus=4, committed_gpu_hours=Decimal("10"), committed_rate=Decimal("10.00"),
        overage_rate=Decimal("12.00"), term_months=12, currency="CNY")
    contract = Contract(tenant=tenant, plan=plan, starts_on=timezone.localdate().replace(day=1),
                        time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    yield cluster, contract
    reset(slurm)


def apply(cluster, at=None) -> list[Change]:
    return apply_limits(cluster_id=cluster.pk, cluster_name="hpc", at=at or timezone.now(),
                        dry_run=False, admission=True)


def policy(contract, kind: str, budget: str | None = None) -> None:
    OveragePolicy.objects.create(contract=contract, kind=kind,
                                 budget=Decimal(budget) if budget else None,
                                 set_at=timezone.now())


def submit(slurm, gpus: int, minutes: int, *options: str) -> str:
    done = slurm.command("sbatch", "--parsable", "-A", "team-a", f"--gres=gpu:{gpus}", "-c1",
                         f"--time={minutes}", "-o", "/dev/null", *options, "--wrap",
                         "sleep 600")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def reason(slurm, job: str) -> str:
    return slurm.command("squeue", "-h", "-j", job, "-o", "%T %r %q").stdout.strip()


def until(slurm, job: str, wanted: str) -> None:
    slurm._until(lambda: reason(slurm, job).startswith(wanted), f"job {job}: {wanted}",
                 seconds=30)


def default_qos(slurm) -> str:
    out = slurm.command("sacctmgr", "-n", "-P", "show", "assoc", "account=team-a",
                        "format=User,DefaultQOS").stdout
    return next(line.split("|")[1] for line in out.splitlines() if line.split("|")[0] == "")


def test_on_hold_the_job_past_the_commitment_pends_until_the_policy_allows_overage(
        ten_hours, slurm):
    cluster, contract = ten_hours
    policy(contract, admission.HOLD)
    apply(cluster)
    assert default_qos(slurm) == COMMIT
    first = submit(slurm, 2, 240)  # reserves 480 of the 600 GPU-minutes
    until(slurm, first, f"RUNNING None {COMMIT}")
    second = submit(slurm, 2, 120)  # 480 + 240 > 600: Slurm holds it back
    until(slurm, second, f"PENDING QOSGrpGRESMinutes {COMMIT}")
    assert not [c for c in apply(cluster) if c.command[:1] == ("scontrol",)]
    until(slurm, second, "PENDING QOSGrpGRESMinutes")  # hold: it waits, with Slurm's reason

    policy(contract, admission.ALLOW)
    moved = apply(cluster)
    assert f"job {second} moved to {OVERAGE}: the commitment is spent" in [c.what for c in moved]
    until(slurm, second, f"RUNNING None {OVERAGE}")
    assert default_qos(slurm) == COMMIT.replace("commit", "overage")
    assert apply(cluster) == []  # nothing left to change

    # The next period: the count starts again, and the commitment's QOS is the default.
    later = contract.period_at(timezone.now()).end + timedelta(hours=1)
    changes = [c.what for c in apply(cluster, later)]
    assert any(w.startswith(f"QOS {COMMIT}: use reset") for w in changes)
    assert default_qos(slurm) == COMMIT

    # Past the contract's end: what gpuloans set is taken away.
    slurm.cancel_all()
    after = contract.periods()[-1].end + timedelta(days=1)
    apply(cluster, after)
    assert default_qos(slurm) == "normal"
    names = slurm.command("sacctmgr", "-n", "-P", "show", "qos", "format=Name").stdout.split()
    assert COMMIT not in names and OVERAGE not in names
    assert SlurmLimitChange.objects.filter(succeeded=False).count() == 0


def test_a_budget_admits_overage_up_to_its_gpu_minutes_and_no_further(ten_hours, slurm):
    cluster, contract = ten_hours
    policy(contract, admission.BUDGET, "24")  # 24 CNY at 12 a GPU-hour: 120 GPU-minutes
    apply(cluster)
    out = slurm.command("sacctmgr", "-n", "-P", "show", "qos", f"name={OVERAGE}",
                        "format=GrpTRESMins").stdout.strip()
    assert out == "gres/gpu=120"
    first = submit(slurm, 2, 240)
    until(slurm, first, "RUNNING")
    too_big = submit(slurm, 2, 120)  # 240 GPU-minutes: more than the commitment has left
    until(slurm, too_big, "PENDING QOSGrpGRESMinutes")
    apply(cluster)  # moved to the overage QOS, where 240 > 120 either
    until(slurm, too_big, f"PENDING QOSGrpGRESMinutes {OVERAGE}")
    fits = submit(slurm, 1, 60, f"--qos={OVERAGE}")  # 60 of the 120
    until(slurm, fits, f"RUNNING None {OVERAGE}")
