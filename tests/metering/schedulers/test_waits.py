"""The floor's waits as the schedulers' readers give them and the store keeps them: Slurm's
accounting in its plain columns and its JSON, read again and updated in place, attributed by
the cluster's rules, a named reason kept when a later reading names none."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from metering.models import AttributionRule, Cluster, JobWait
from metering.schedulers import waits
from metering.schedulers.slurm import sacct
from metering.schedulers.slurm.accounting import seen

GRACE = timedelta(seconds=60)
NOW = datetime(2026, 12, 2, 9, tzinfo=UTC)

# JobID|Account|User|Start|End|AllocTRES|State|Submit|Eligible|Reason|QOS|ReqTRES, as Slurm
# 22.05 prints them (TZ=UTC): a job that waited ten minutes; one a second (a scheduler cycle);
# one pending for room; one that never became eligible; one cancelled waiting; one asking for
# no GPU; one whose requested GPUs are typed.
PARSABLE = "".join(f"{line}\n" for line in (
    "11|team-a|alice|2026-12-02T08:10:00|2026-12-02T08:40:00|gres/gpu=1|COMPLETED|"
    "2026-12-02T08:00:00|2026-12-02T08:00:00|None|normal|billing=1,gres/gpu=1",
    "12|team-a|alice|2026-12-02T08:00:01|2026-12-02T08:40:00|gres/gpu=1|COMPLETED|"
    "2026-12-02T08:00:00|2026-12-02T08:00:00|None|normal|gres/gpu=1",
    "13|team-a|alice|Unknown|Unknown||PENDING|2026-12-02T08:30:00|2026-12-02T08:30:00|"
    "Resources|normal|gres/gpu=2",
    "14|team-a|alice|Unknown|Unknown||PENDING|2026-12-02T08:30:00|Unknown|Dependency|normal|"
    "gres/gpu=1",
    "15|team-a|alice|None|2026-12-02T08:50:00||CANCELLED by 0|2026-12-02T08:20:00|"
    "2026-12-02T08:20:00|None|normal|gres/gpu=4",
    "16|team-a|alice|2026-12-02T08:10:00|2026-12-02T08:40:00|cpu=1|COMPLETED|"
    "2026-12-02T08:00:00|2026-12-02T08:00:00|None|normal|cpu=1",
    "17|team-a|alice|Unknown|Unknown||PENDING|2026-12-02T08:45:00|2026-12-02T08:45:00|"
    "Priority|gpuloans-overage-team-a|gres/gpu:h100=1",
))


def test_the_plain_columns_give_every_job_that_waited_for_gpus_with_why():
    read = sacct.read_parsable_all(PARSABLE)
    assert [j.job for j in read.jobs] == ["11", "12"]  # those that held GPUs, as before
    waited = {w.job: w for w in read.waited}
    assert set(waited) == {"11", "12", "13", "14", "15", "17"}  # 16 asked for no GPU
    assert (waited["13"].gpus, waited["13"].reason, waited["13"].start) == (2, "Resources", None)
    assert waited["14"].eligible is None and waited["17"].gpu_type == "h100"
    assert waited["17"].qos == "gpuloans-overage-team-a"
    capacity = {k: w.capacity(GRACE, NOW) for k, w in waited.items()}
    # 11 waited ten minutes with no reason kept: for room. 12 waited a scheduler cycle. 14
    # waits for a dependency. 15 was cancelled after 30 minutes waiting.
    assert capacity == {"11": True, "12": False, "13": True, "14": False, "15": True,
                        "17": True}


def test_the_json_gives_the_same_waits():
    def stamp(text):
        return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())

    answer = {"jobs": [
        {"job_id": 13, "account": "team-a", "user": "alice", "qos": "normal",
         "state": {"current": "PENDING", "reason": "Resources"},
         "time": {"submission": stamp("2026-12-02T08:30:00"),
                  "eligible": stamp("2026-12-02T08:30:00"), "start": 0, "end": 0},
         "tres": {"allocated": [], "requested": [
             {"type": "cpu", "name": None, "count": 1},
             {"type": "gres", "name": "gpu", "count": 2}]}},
        {"job_id": 17, "account": "team-a", "user": "alice", "qos": "normal",
         "state": {"current": "COMPLETED", "reason": "None"},
         "time": {"submission": stamp("2026-12-02T08:00:00"),
                  "eligible": stamp("2026-12-02T08:00:00"),
                  "start": stamp("2026-12-02T08:10:00"), "end": stamp("2026-12-02T08:40:00")},
         "tres": {"allocated": [{"type": "gres", "name": "gpu:h100", "count": 1}],
                  "requested": [{"type": "gres", "name": "gpu:h100", "count": 1}]}},
    ]}
    read = sacct.read_json_all(json.dumps(answer))
    assert [(w.job, w.gpus, w.gpu_type, w.reason) for w in read.waited] == [
        ("13", 2, "", "Resources"), ("17", 1, "h100", "None")]
    assert [j.job for j in read.jobs] == ["17"]


def test_the_window_reaches_the_second_the_pass_runs_in():
    calls = []

    def run(command):
        calls.append(command)
        return sacct.subprocess.CompletedProcess(command, 0, '{"jobs": []}', "")

    sacct.sacct_all(NOW, NOW + timedelta(seconds=10, microseconds=300), run)
    assert calls[0][calls[0].index("-E") + 1] == "2026-12-02T09:00:11"


@pytest.fixture
def cluster(db, tenant):
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    return cluster


def test_a_wait_read_again_is_updated_in_place_attributed_and_keeps_its_named_reason(cluster,
                                                                                   tenant):
    [pending] = [w for w in sacct.read_parsable_all(PARSABLE).waited if w.job == "13"]
    assert waits.store(cluster, "slurm", [seen(pending, NOW)], NOW) == waits.Stored(1, 1, 0)
    row = JobWait.objects.get()
    assert (row.tenant_id, row.reason, row.capacity, row.started) == (
        tenant.pk, "Resources", True, None)
    # The next pass: it started a second after the last, and accounting names no reason.
    started = sacct.Waited(**{**pending.__dict__, "start": NOW, "reason": "None"})
    later = NOW + timedelta(minutes=15)
    assert waits.store(cluster, "slurm", [seen(started, later)], later) == waits.Stored(1, 0, 1)
    row.refresh_from_db()
    assert (row.started, row.reason, row.capacity, row.updated_at) == (
        NOW, "Resources", True, later)
    # Read once more, unchanged: nothing written.
    assert waits.store(cluster, "slurm", [seen(started, later)], later) == waits.Stored(1, 0, 0)


def test_a_finished_job_that_never_waited_for_room_is_not_kept(cluster):
    short = [w for w in sacct.read_parsable_all(PARSABLE).waited if w.job == "12"]
    assert waits.store(cluster, "slurm", [seen(w, NOW) for w in short], NOW).new == 0
    assert not JobWait.objects.exists()


def test_a_wait_of_an_account_no_rule_names_is_kept_unattributed(cluster):
    other = sacct.Waited(**{**sacct.read_parsable_all(PARSABLE).waited[2].__dict__,
                            "account": "proj-x"})
    waits.store(cluster, "slurm", [seen(other, NOW)], NOW)
    assert JobWait.objects.get().tenant is None
