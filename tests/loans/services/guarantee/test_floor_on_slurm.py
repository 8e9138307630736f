"""The floor on a real Slurm (tests/slurm.py: one node of four h100 GPUs, slurmdbd on MariaDB):
the waits come from sacct in the accounting pass, to the second of its Eligible and Start, and
the statement credits the tier the period fell below."""

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from loans.maths import billing
from loans.models import Contract, ContractHold, Plan, Statement
from loans.services.guarantee import measure
from loans.services.ledger.closing import close_due_periods
from metering.intake import protocol
from metering.intake.ingest import ingest
from metering.models import AttributionRule, Cluster, JobWait, Node
from metering.schedulers.slurm.accounting import import_usage

H100 = "NVIDIA H100 80GB HBM3"


def submit(slurm, account: str, gpus: int) -> str:
    done = slurm.command("sbatch", "--parsable", "-A", account, f"--gres=gpu:h100:{gpus}", "-c1",
                         "--time=10", "-o", "/dev/null", "--wrap", "sleep 600")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def pending_for_room(slurm, job: str) -> None:
    """Until the job pends for room: Resources, or Priority behind another that does."""
    slurm._until(lambda: slurm.command("squeue", "-h", "-j", job, "-o", "%T %r").stdout.strip()
                 in ("PENDING Resources", "PENDING Priority"), f"job {job} to pend for room",
                 seconds=30)


def sacct_times(slurm, job: str) -> dict[str, datetime | None]:
    line = slurm.command("sacct", "-X", "-n", "-P", "-j", job, "-o",
                         "Eligible,Start,End").stdout.strip().splitlines()[0]

    def moment(text):
        # sacct's columns print local times (the product reads --json's epoch seconds)
        return None if text in ("Unknown", "None", "") else datetime.fromisoformat(
            text).astimezone(UTC)

    return dict(zip(("eligible", "start", "end"), map(moment, line.split("|")), strict=True))


def held(node: Node, uuid: str, start: datetime, until: datetime) -> None:
    """What the agent would have sent: the GPU held by team-a from `start` on, in samples of
    at most an hour."""
    samples, at = [], start
    while at < until:
        seconds = min(3600, int((until - at).total_seconds()))
        if seconds < 1:
            break
        samples.append({"gpu_uuid": uuid, "model": H100, "ts": at.isoformat(),
                        "interval_s": seconds, "allocated": True, "util_pct": 50.0,
                        "owner": {"account": "team-a"}})
        at += timedelta(seconds=seconds)
    result = ingest(node, protocol.Envelope(node.name, "test", 0, samples), now=until)
    assert result.rejected == [], result.rejected


@pytest.mark.django_db(transaction=True)
def test_one_short_gpu_to_the_second_of_sacct_and_nothing_while_held_by_its_own_hold(
        slurm, tenant, monkeypatch, settings):
    """Base quota 2: team-a runs a 1-GPU job; proj-x fills the node's other three GPUs (one
    job: the node has two CPUs, each job takes one);
    team-a's 1-GPU job waits until one frees, a 2-GPU job beside it is cancelled while
    waiting: 1 short GPU (min(1 + 2, 2 - 1)) from the first's Eligible to its Start, nothing
    more for the 2-GPU job. A third job waits while gpuloans holds the contract: nothing."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    settings.GPU_TYPE_MODELS = {"h100": H100}
    # slurmdbd keeps no pending reason here: a wait counts past the grace (a scheduler cycle
    # is a second or two on this Slurm; the waits below are five seconds and more).
    settings.SLURM_WAIT_GRACE_SECONDS = 4
    slurm.cancel_all()
    slurm.command("sacctmgr", "-i", "modify", "account", "where", "name=team-a", "set",
                  "QOS=normal", "DefaultQOS=normal", "GrpTRES=gres/gpu=-1")
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    node = Node.objects.create(name="gpu-a", cluster=cluster)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    plan = Plan.objects.create(
        name="H100 x2", gpu_model=H100, base_quota_gpus=2, max_quota_gpus=4,
        committed_gpu_hours=Decimal(100), committed_rate=Decimal("10.00"), term_months=12,
        currency="CNY", guarantee_pct=Decimal("99.99"), credit_tiers="100:10")
    contract = Contract(tenant=tenant, plan=plan, starts_on=datetime.now(UTC).date(),
                        time_zone="UTC", status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    time.sleep(1.5)  # whole seconds in Slurm's times
    since = timezone.now()

    running = slurm.sbatch("-A", "team-a", "--gres=gpu:h100:1")
    filler = slurm.sbatch("-A", "proj-x", "--gres=gpu:h100:3")
    one, two = submit(slurm, "team-a", 1), submit(slurm, "team-a", 2)
    for job in (one, two):
        pending_for_room(slurm, job)
    # An accounting pass while they wait (beat runs one every 15 minutes).
    import_usage(cluster, now=timezone.now(), since=since)
    time.sleep(5)
    slurm.command("scancel", filler)
    slurm._until(lambda: slurm.state(one) == "RUNNING", f"job {one} to run")
    time.sleep(5)
    slurm.command("scancel", two)  # cancelled while it waited
    # gpuloans holds the contract (its own record) while a third job waits for room.
    hold = ContractHold.objects.create(contract=contract, reason="hold", since=timezone.now())
    three = submit(slurm, "team-a", 1)
    pending_for_room(slurm, three)
    import_usage(cluster, now=timezone.now(), since=since)
    time.sleep(5)
    slurm.command("scancel", three)
    ContractHold.objects.filter(pk=hold.pk).update(until=timezone.now() + timedelta(seconds=1))

    def accounted() -> bool:
        times = {job: sacct_times(slurm, job) for job in (running, one, two, three)}
        return (all(times[j]["start"] for j in (running, one))
                and all(times[j]["end"] for j in (two, three)))

    slurm._until(accounted, "accounting to have the jobs' starts and ends")
    now = timezone.now()
    held(node, "GPU-running", sacct_times(slurm, running)["start"], now)
    held(node, "GPU-one", sacct_times(slurm, one)["start"], now)
    import_usage(cluster, now=now, since=since)
    kept = {w.key: w for w in JobWait.objects.filter(cluster=cluster, tenant=tenant)}
    # The first job started a scheduler cycle after its Eligible: no wait for room.
    assert set(kept) == {one, two, three}
    assert [kept[j].capacity for j in (one, two, three)] == [True, True, True]
    # Accounting keeps gres/gpu untyped here (AccountingStorageTRES=gres/gpu): the request
    # counts for the H100 plan because the cluster's GPUs are all H100s.
    assert {kept[j].gpu_type for j in (one, two, three)} == {""}
    assert kept[two].started is None and kept[two].ended is not None  # cancelled waiting

    first = sacct_times(slurm, one)
    assert (kept[one].eligible, kept[one].started) == (first["eligible"], first["start"])
    waited = (first["start"] - first["eligible"]).total_seconds()
    assert waited >= 5
    period = contract.periods()[0]
    [floor] = measure.read(contract, [(period, contract.terms_for(0))], now).values()
    assert floor.measure.short_seconds == waited
    assert floor.measure.short_gpu_hours == pytest.approx(waited / 3600)

    slurm.cancel_all()
    after = period.end + timedelta(hours=3)
    with time_machine.travel(after, tick=False):
        close_due_periods(after)
    statement = Statement.objects.get(contract=contract, period_index=0)
    assert statement.short_gpu_hours == billing.gpu_hours(waited / 3600)
    assert statement.credit_pct == 10
    assert statement.credit == -billing.money(statement.committed_cost / 10, "CNY")
