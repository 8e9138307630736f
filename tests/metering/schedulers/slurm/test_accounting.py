"""Slurm accounting as a second meter: sacct's answers read, jobs imported idempotently, and the
agents' meter reconciled with it; against random histories (a brute-force model) and a real
Slurm with slurmdbd (tests/slurm.py)."""

import json
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering.models import (
    AttributionRule,
    Cluster,
    GpuHour,
    SlurmHour,
    SlurmJob,
    TenantHour,
    UsageSample,
)
from metering.models import Node as MeterNode
from metering.schedulers.slurm import sacct as accounting
from metering.schedulers.slurm.accounting import import_jobs
from metering.schedulers.slurm.sacct import Job, gpus_of, read_json, read_parsable, spread_seconds
from metering.usage.slurm import reconcile
from tests.helpers import assert_rollups_equal_a_recount
from tests.tiers import examples

UTC_ZONE = ZoneInfo("UTC")
T0 = datetime(2026, 11, 30, 10, tzinfo=UTC)

# As Slurm 22.05 prints them (TZ=UTC): a finished job, a running one, a pending one, one
# without GPUs, and an array task.
PARSABLE = "".join(f"{line}\n" for line in (
    "1|team-a|root|2026-12-02T07:53:49|2026-12-02T07:54:19|billing=1,cpu=1,gres/gpu=2,node=1|"
    "COMPLETED",
    "2|team-a|root|2026-12-02T07:53:50|Unknown|billing=1,cpu=1,gres/gpu=2,node=1|RUNNING",
    "3|team-a|root|Unknown|Unknown||PENDING",
    "4|proj-x|bob|2026-12-02T07:50:00|2026-12-02T07:51:00|billing=1,cpu=1,node=1|COMPLETED",
    "5_7|proj-x|bob|2026-12-02T07:50:00|2026-12-02T08:50:00|cpu=1,gres/gpu:h100=1,"
    "gres/gpu:a100=2|CANCELLED by 0",
))

def test_sacct_plain_columns_are_read_as_jobs_that_held_gpus():
    jobs = read_parsable(PARSABLE)
    assert [(j.job, j.gpus, j.end is None, j.state) for j in jobs] == [
        ("1", 2, False, "COMPLETED"), ("2", 2, True, "RUNNING"), ("5_7", 3, False, "CANCELLED")]
    assert jobs[0].start == datetime(2026, 12, 2, 7, 53, 49, tzinfo=UTC)


def test_sacct_json_is_read_as_the_same_jobs():
    answer = {"jobs": [
        {"job_id": 1, "account": "team-a", "user": "root", "state": {"current": "COMPLETED"},
         "array": {"job_id": 0, "task_id": None},
         "time": {"start": 1796198029, "end": 1796198059},
         "tres": {"allocated": [{"type": "cpu", "name": None, "count": 1},
                                {"type": "gres", "name": "gpu", "count": 2}]}},
        {"job_id": 9, "account": "team-a", "user": "root", "state": {"current": "RUNNING"},
         "array": {"job_id": 5, "task_id": 7}, "time": {"start": 1796198029, "end": 0},
         "tres": {"allocated": [{"type": "gres", "name": "gpu:h100", "count": 1}]}},
        {"job_id": 3, "account": "x", "user": "y", "state": {"current": "PENDING"},
         "time": {"start": 0, "end": 0}, "tres": {"allocated": []}},
    ]}
    jobs = read_json(json.dumps(answer))
    assert [(j.job, j.gpus, j.end is None, j.state) for j in jobs] == [
        ("1", 2, False, "COMPLETED"), ("5_7", 1, True, "RUNNING")]
    assert jobs[0].end - jobs[0].start == timedelta(seconds=30)


@pytest.mark.parametrize(("tres", "gpus"), [
    ("billing=1,cpu=1,gres/gpu=2,node=1", 2), ("cpu=4,gres/gpu:h100=1,gres/gpu:a100=2", 3),
    ("cpu=1,gres/gpu=4,gres/gpu:h100=4", 4), ("cpu=1,node=1", 0), ("", 0)])
def test_the_gpus_of_an_alloc_tres(tres, gpus):
    assert gpus_of(tres) == gpus


@pytest.mark.parametrize("tres", ["gres/gpu=x", "gres/gpu=12345678", "gres/gpu:h100=٣"])
def test_a_count_that_is_no_number_of_gpus_is_refused_with_it(tres):
    with pytest.raises(ValueError, match=tres.rsplit("=", 1)[1]):
        gpus_of(tres)


def test_the_one_reader_is_what_the_advices_history_reads():
    """The advice's sacct upload and the importer read AllocTRES alike: typed counts summed
    where no total is listed (the history took the first typed count: 1 GPU of 3)."""
    from loans.services.advice.history import read_history

    text = ("JobID|Account|User|Start|End|AllocTRES\n"
            "1|a|u|2026-11-01T00:00:00|2026-11-01T02:00:00|cpu=4,gres/gpu:a100=1,gres/gpu:h100=2\n")
    assert read_history(text).hours == [3.0, 3.0]


def test_a_sacct_without_json_is_read_in_plain_columns():
    calls = []

    def run(command):
        calls.append(command)
        if "--json" in command:
            return accounting.subprocess.CompletedProcess(command, 1, "", "sacct: unrecognized "
                                                                          "option '--json'")
        return accounting.subprocess.CompletedProcess(command, 0, PARSABLE, "")

    jobs = accounting.sacct(T0, T0 + timedelta(days=1), run)
    assert len(jobs) == 3 and "-P" in calls[1] and "-X" in calls[1]
    assert "2026-11-30T10:00:00" in calls[0]


def test_a_sacct_that_fails_says_why():
    def run(command):
        return accounting.subprocess.CompletedProcess(
            command, 1, "", "sacct: error: Problem talking to the database: Connection refused")

    with pytest.raises(accounting.AccountingError, match="Connection refused"):
        accounting.sacct(T0, T0 + timedelta(days=1), run)


def test_a_job_counts_in_the_hours_it_covers_in_proportion():
    assert spread_seconds(T0, 3, [(T0 + timedelta(minutes=30),
                                   T0 + timedelta(hours=1, minutes=15), 1)]) == [
        1800.0, 900.0, 0.0]
    assert spread_seconds(T0, 4, [(T0 + timedelta(minutes=30), T0 + timedelta(hours=3), 2)]) == [
        3600.0, 7200.0, 7200.0, 0.0]


# Random histories against a brute-force model: every second a job held counts once, in its
# hour, at its GPUs; importing again changes nothing; a running job completed later is counted
# for its whole run, once.
job_strategy = st.tuples(
    st.integers(0, 5),  # job id
    st.sampled_from(["team-a", "proj-x"]), st.sampled_from(["alice", "bob"]),
    st.integers(1, 8),  # GPUs
    st.integers(0, 3 * 3600),  # start, seconds after T0
    st.integers(1, 3 * 3600),  # duration
    st.booleans(),  # still running at the first import
)


def brute_force(jobs: dict[str, Job], now: datetime) -> dict[tuple, float]:
    model: dict[tuple, float] = defaultdict(float)
    for job in jobs.values():
        end = job.end or now
        second = job.start
        while second < end:
            hour = second.replace(minute=0, second=0, microsecond=0)
            step = min(end, hour + timedelta(hours=1))
            model[(job.account, job.user, hour)] += (step - second).total_seconds() * job.gpus
            second = step
    return {k: v for k, v in model.items() if v}


def stored_hours(cluster) -> dict[tuple, float]:
    return {(h.account, h.user, h.hour): h.gpu_s for h in SlurmHour.objects.filter(
        cluster=cluster)}


@pytest.mark.django_db
@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(job_strategy, min_size=1, max_size=10))
def test_imported_hours_equal_a_brute_force_count_and_a_second_import_changes_nothing(raw):
    cluster, _ = Cluster.objects.get_or_create(name="hpc", kind=Cluster.Kind.SLURM)
    SlurmJob.objects.all().delete()
    SlurmHour.objects.all().delete()
    first_now = T0 + timedelta(hours=4)
    finished, running = {}, {}
    for job_id, account, user, gpus, start, duration, runs in raw:
        begun = T0 + timedelta(seconds=start)
        ends = min(begun + timedelta(seconds=duration), first_now)
        job = Job(str(job_id), account, user, gpus, begun, None if runs else ends, "X")
        finished[job.job] = Job(job.job, account, user, gpus, begun, ends, "COMPLETED")
        running[job.job] = job
    import_jobs(cluster, list(running.values()), first_now)
    assert stored_hours(cluster) == pytest.approx(brute_force(running, first_now))
    import_jobs(cluster, list(running.values()), first_now)  # the same answer again
    assert stored_hours(cluster) == pytest.approx(brute_force(running, first_now))
    later = first_now + timedelta(hours=2)
    done = import_jobs(cluster, list(finished.values()), later)  # every job has ended now
    assert done.completed == sum(1 for j in running.values() if j.end is None)
    assert stored_hours(cluster) == pytest.approx(brute_force(finished, later))
    assert SlurmJob.objects.filter(cluster=cluster).count() == len(finished)


@pytest.fixture
def hpc(db, tenant, other_tenant):
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    AttributionRule.objects.create(tenant=other_tenant, cluster=cluster, value="proj-x",
                                   field=AttributionRule.Field.ACCOUNT)
    return cluster


def meter(node, gpu_uuid: str, start: datetime, seconds: int, client, token: str,
          index: int = 0) -> None:
    """What an agent would post for one GPU held over [start, start + seconds), a sample an
    hour at most."""
    samples, moment, left = [], start, seconds
    while left > 0:
        step = min(left, 3600)
        samples.append({"gpu_uuid": gpu_uuid, "gpu_index": index,
                        "ts": moment.isoformat().replace("+00:00", "Z"), "interval_s": step,
                        "allocated": True, "owner": {"account": "team-a", "user": "root"}})
        moment, left = moment + timedelta(seconds=step), left - step
    answer = client.post("/api/v1/samples", json.dumps({"node": node.name, "samples": samples}),
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 202 and not answer.json()["rejected"], answer.content


def test_a_fully_metered_tenant_reconciles_to_zero_and_a_stopped_agent_shows_its_gap(
        hpc, tenant, client):
    now = datetime.now(UTC).replace(microsecond=0)
    # Yesterday 06:00-09:00 UTC: one day whatever the hour the test runs (five hours back
    # crossed midnight between 00:00 and 05:00 and made two days of one job).
    start = now.replace(hour=6, minute=0, second=0) - timedelta(days=1)
    import_jobs(hpc, [Job("1", "team-a", "root", 2, start, start + timedelta(hours=3), "X")],
                now)
    node = MeterNode.objects.create(name="hpc-node-01", cluster=hpc)
    token = node.issue_token()
    for k in range(2):
        meter(node, f"GPU-{k}", start, 3 * 3600, client, token, k)
    [day] = [c for c in reconcile(hpc, start, now, UTC_ZONE, tenant.pk) if c.slurm_gpu_hours]
    checks = reconcile(hpc, start - timedelta(days=1), now, UTC_ZONE, tenant.pk)
    assert sum(c.slurm_gpu_hours for c in checks) == pytest.approx(6.0)
    assert all(c.difference == pytest.approx(0, abs=1e-6) for c in checks)
    assert day.tenant_id == tenant.pk
    # A second node of the cluster whose agent stopped: Slurm's job there, half of it metered.
    import_jobs(hpc, [Job("2", "team-a", "root", 1, start, start + timedelta(hours=2), "X")],
                now)
    other = MeterNode.objects.create(name="hpc-node-02", cluster=hpc)
    meter(other, "GPU-9", start, 3600, client, other.issue_token())
    checks = reconcile(hpc, start - timedelta(days=1), now, UTC_ZONE, tenant.pk)
    assert sum(c.difference for c in checks) == pytest.approx(-1.0)
    worst = min(checks, key=lambda c: c.difference)
    assert worst.share < 0


def test_hours_an_agent_counted_past_a_jobs_end_in_sacct_are_the_jobs_no_more(
        hpc, tenant, client):
    """A prolog record whose epilog never ran held its GPU for the job's account until the
    agent's hourly check; when sacct's End arrives, what was stored past it (a sample crossing
    it split there) is stored as not allocated and recounted; a running job keeps its hours."""
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
    node = MeterNode.objects.create(name="hpc-node-01", cluster=hpc)
    token = node.issue_token()
    for k, job in enumerate(("7", "8")):
        samples = [{"gpu_uuid": f"GPU-{k}", "gpu_index": k, "interval_s": 3600,
                    "ts": (start + h * timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
                    "allocated": True, "owner": {"account": "team-a", "user": "root",
                                                 "job": job}} for h in range(5)]
        answer = client.post("/api/v1/samples", json.dumps({"node": node.name,
                                                            "samples": samples}),
                             content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
        assert answer.json()["accepted"] == 5
    assert tenant_gpu_hours(tenant) == pytest.approx(10.0)
    ended = start + timedelta(hours=2, minutes=30)
    import_jobs(hpc, [Job("7", "team-a", "root", 1, start, ended, "COMPLETED"),
                      Job("8", "team-a", "root", 1, start, None, "RUNNING")],
                start + timedelta(hours=5))
    assert tenant_gpu_hours(tenant) == pytest.approx(2.5 + 5.0)
    gone = UsageSample.objects.filter(gpu__uuid="GPU-0", ts__gte=ended)
    assert gone.count() == 3 and not gone.filter(allocated=True).exists()
    assert_rollups_equal_a_recount()
    import_jobs(hpc, [Job("7", "team-a", "root", 1, start, ended, "COMPLETED")],
                start + timedelta(hours=6))  # read again: nothing more changes
    assert tenant_gpu_hours(tenant) == pytest.approx(7.5)


def tenant_gpu_hours(tenant) -> float:
    return sum(TenantHour.objects.filter(tenant=tenant).values_list(
        "allocated_gpu_s", flat=True)) / 3600


def test_usage_of_other_clusters_is_not_the_slurm_clusters(hpc, tenant, client):
    now = datetime.now(UTC).replace(microsecond=0)
    elsewhere = MeterNode.objects.create(name="k8s-node", cluster=Cluster.objects.create(
        name="k8s", kind=Cluster.Kind.KUBERNETES), default_tenant=tenant)
    meter(elsewhere, "GPU-k", now - timedelta(hours=2), 3600, client, elsewhere.issue_token())
    assert GpuHour.objects.filter(tenant=tenant).exists()
    assert reconcile(hpc, now - timedelta(days=1), now, UTC_ZONE) == []


# Against a real Slurm with slurmdbd: the import equals the GPU-hours of the jobs it ran, as
# the controller reported their start and end.

def controller_times(slurm, job: str) -> tuple[datetime, datetime | None]:
    line = slurm.command("scontrol", "-o", "show", "job", job).stdout
    fields = dict(item.split("=", 1) for item in line.split() if "=" in item)

    def moment(text):
        return None if text in ("Unknown", "None") else datetime.fromisoformat(text).astimezone(
            UTC)

    return moment(fields["StartTime"]), moment(fields["EndTime"])


def wait_for_end(slurm, job: str) -> None:
    slurm._until(lambda: controller_times(slurm, job)[1] is not None
                 and slurm.state(job) == "", f"job {job} to end")


@pytest.mark.django_db(transaction=True)
def test_the_import_equals_the_gpu_hours_of_real_jobs_and_twice_changes_nothing(slurm,
                                                                              monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])  # as a Slurm client's would
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    slurm.cancel_all()
    time.sleep(1.5)  # whole seconds in Slurm's times: earlier tests' jobs end before `since`
    since = datetime.now(UTC)
    short = slurm.sbatch("-A", "team-a", "--gres=gpu:h100:2", seconds=3)
    other = slurm.sbatch("-A", "proj-x", "--gres=gpu:1", seconds=2)
    long = slurm.sbatch("-A", "team-a", "--gres=gpu:1", seconds=600)
    for job in (short, other):
        wait_for_end(slurm, job)
    # slurmctld tells slurmdbd of a job's start (with its GPUs) a moment after it: wait until
    # accounting has every job's, as a first record may hold only its submission.
    def started() -> bool:
        rows = slurm.command("sacct", "-X", "-n", "-P", "-o", "JobID,Start,AllocTRES", "-j",
                             f"{short},{other},{long}").stdout.split()
        return len(rows) == 3 and all("gres/gpu" in row and "|Unknown|" not in row
                                      for row in rows)

    slurm._until(started, "accounting to have the jobs' starts")
    call_command("import_slurm_usage", "--cluster", "hpc", "--since", since.isoformat())
    jobs = {j.job: j for j in SlurmJob.objects.filter(cluster=cluster)}
    assert set(jobs) == {short, other, long}
    assert jobs[long].end is None and jobs[short].end is not None
    expected = 0.0
    for job, gpus in ((short, 2), (other, 1)):
        start, end = controller_times(slurm, job)
        assert (jobs[job].start, jobs[job].end, jobs[job].gpus) == (start, end, gpus)
        expected += (end - start).total_seconds() * gpus
    running_for = (jobs[long].imported_at - jobs[long].start).total_seconds()
    total = sum(h.gpu_s for h in SlurmHour.objects.filter(cluster=cluster))
    assert total == pytest.approx(expected + running_for)
    assert {h.account for h in SlurmHour.objects.all()} == {"team-a", "proj-x"}

    finished = {h.pk: (h.account, h.hour, h.gpu_s) for h in SlurmHour.objects.filter(
        account="proj-x")}
    call_command("import_slurm_usage", "--cluster", "hpc", "--since", since.isoformat())
    assert SlurmJob.objects.filter(cluster=cluster).count() == 3
    assert {(h.account, h.hour, h.gpu_s) for h in SlurmHour.objects.filter(
        account="proj-x")} == set(finished.values())

    slurm.command("scancel", long)
    wait_for_end(slurm, long)
    call_command("import_slurm_usage", "--cluster", "hpc")  # from where the last one left off
    start, end = controller_times(slurm, long)
    completed = SlurmJob.objects.get(cluster=cluster, job=long)
    assert (completed.start, completed.end) == (start, end)
    total = sum(h.gpu_s for h in SlurmHour.objects.filter(cluster=cluster))
    assert total == pytest.approx(expected + (end - start).total_seconds())
