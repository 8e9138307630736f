"""The Slurm allocation source: its reading of `squeue --json`, and against a real Slurm
(tests/slurm.py) with real sbatch jobs; end to end: agent -> server -> usage API."""

import json
import logging
import time
from datetime import UTC, datetime, timedelta

import pytest

from agent.aggregate import Aggregator
from agent.holders import HolderError, Holders
from agent.holders.slurm import SlurmSource, expand_hostlist, indices, jobs_on, slurm_slots
from agent.holders.slurm_records import SlurmRecordsSource
from agent.readings import Process, Reading
from loans.services.alerts import conditions as alerts
from metering.models import AttributionRule, Cluster
from metering.models import Node as MeterNode
from tests.agent.holding import HOUR, IdleCollector, agent, poll_hour, usage_hour

# One job as Slurm 22.05 prints it (squeue --json), cut short.
JOB = {"job_id": 1, "name": "wrap", "user_name": "alice", "account": "team-a",
       "job_state": "RUNNING", "partition": "debug", "nodes": "vm",
       "gres_detail": ["gpu:h100:2(IDX:0-1)"],
       "job_resources": {"nodes": "vm", "allocated_nodes": [{"nodename": "vm"}]}}


def squeue(*jobs: dict) -> str:
    return json.dumps({"meta": {}, "errors": [], "jobs": list(jobs)})


def test_a_running_jobs_gpus_on_this_node_are_held_by_its_account_user_and_id():
    [job] = jobs_on(squeue(JOB), "vm")
    assert (job.job, job.account, job.user, job.partition, job.gpus) == (
        "1", "team-a", "alice", "debug", (0, 1))
    assert job.owner == {"account": "team-a", "user": "alice", "job": "1"}
    assert jobs_on(squeue(JOB), "other-node") == []


def test_a_job_over_several_nodes_holds_what_it_got_on_each():
    job = {**JOB, "job_id": 42, "nodes": "gpu[01-02]",
           "gres_detail": ["gpu:a100:4(IDX:0-3)", "gpu:a100:1(IDX:5),gpu:h100:1(IDX:7)"],
           "job_resources": {"allocated_nodes": [{"nodename": "gpu01"}, {"nodename": "gpu02"}]}}
    assert jobs_on(squeue(job), "gpu01")[0].gpus == (0, 1, 2, 3)
    assert jobs_on(squeue(job), "gpu02")[0].gpus == (5, 7)
    del job["job_resources"]  # the host list, where Slurm gives no allocated nodes
    assert jobs_on(squeue(job), "gpu02")[0].gpus == (5, 7)


@pytest.mark.parametrize("state", ["PENDING", "COMPLETED", "CANCELLED", "FAILED", ["PENDING"]])
def test_jobs_that_hold_nothing_now_are_left_out(state):
    assert jobs_on(squeue({**JOB, "job_state": state}), "vm") == []


def test_a_later_slurms_list_of_states_is_read():
    assert jobs_on(squeue({**JOB, "job_state": ["RUNNING"]}), "vm")[0].gpus == (0, 1)


def test_a_job_without_gpus_and_output_that_is_no_job_are_left_out():
    assert jobs_on(squeue({**JOB, "gres_detail": []}), "vm") == []
    assert jobs_on(squeue(), "vm") == []
    assert jobs_on(squeue({**JOB, "gres_detail": [7]}, "not a job"), "vm") == []
    with pytest.raises(HolderError, match="no JSON"):
        jobs_on("No jobs in the system\n", "vm")


def test_a_job_name_that_reads_like_fields_claims_nothing():
    spoof = {**JOB, "job_id": 2, "account": "proj-x", "job_state": "PENDING", "nodes": "",
             "gres_detail": [], "job_resources": None,
             "name": "x Account=team-b JobState=RUNNING Nodes=vm GRES=gpu:h100:4(IDX:0-3)"}
    assert [(j.job, j.gpus) for j in jobs_on(squeue(JOB, spoof), "vm")] == [("1", (0, 1))]


@pytest.mark.parametrize(("text", "names"), [
    ("vm", ["vm"]),
    ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
    ("rack[1-2]-n[8-9]", ["rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
])
def test_slurms_compressed_host_lists_expand_to_names(text, names):
    assert expand_hostlist(text) == names


def test_an_idx_list_is_gpu_indices():
    assert indices("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]


def idle(count: int = 4) -> list[Reading]:
    return [Reading(uuid=f"GPU-{k}", index=k, util_pct=0.0) for k in range(count)]


def test_a_pending_job_named_like_a_running_one_claims_no_gpu_on_a_real_slurm(slurm):
    slurm.cancel_all()
    running = slurm.sbatch("-A", "team-a", "--gres=gpu:h100:2")
    spoof = (f"x Account=team-b JobState=RUNNING Nodes={slurm.node} "
             f"GRES=gpu:h100:4(IDX:0-3)")
    pending = slurm.command("sbatch", "--parsable", "-c1", "-o", "/dev/null", "-A", "proj-x",
                            "-J", spoof, "--gres=gpu:4", "--wrap", "sleep 600")
    assert pending.returncode == 0, pending.stderr
    assert slurm.state(pending.stdout.strip().split(";")[0]) == "PENDING"
    owners = [r.owner for r in SlurmSource(slurm.node, env=slurm.env).read().apply(idle())]
    assert owners == [{"account": "team-a", "user": "root", "job": running}] * 2 + [None] * 2
    slurm.cancel_all()


def test_the_gpus_of_real_jobs_are_held_by_them(slurm):
    slurm.cancel_all()
    first = slurm.sbatch("-A", "team-a", f"--gres=gpu:{'h100'}:2")
    second = slurm.sbatch("-A", "proj-x", "--gres=gpu:1")
    source = SlurmSource(slurm.node, env=slurm.env)
    seen = source.read().apply(idle())
    owners = [r.owner for r in seen]
    assert owners[:2] == [{"account": "team-a", "user": "root", "job": first}] * 2
    assert owners[2] == {"account": "proj-x", "user": "root", "job": second}
    assert owners[3] is None and not seen[3].allocated
    slurm.cancel_all()
    assert not any(r.allocated for r in source.read().apply(idle()))


@pytest.fixture
def metered(transactional_db, tenant, other_tenant):
    """A node of a Slurm cluster whose account team-a is the tenant's and proj-x the other
    tenant's."""
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    node = MeterNode.objects.create(name="hpc-node-01", cluster=cluster)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    AttributionRule.objects.create(tenant=other_tenant, cluster=cluster, value="proj-x",
                                   field=AttributionRule.Field.ACCOUNT)
    return node, node.issue_token()


def test_a_job_holding_gpus_with_no_process_is_billed_for_each_of_them_end_to_end(
        slurm, metered, tmp_path, live_server, client, operator, tenant):
    node, token = metered
    slurm.cancel_all()
    job = slurm.sbatch("-A", "team-a", "--gres=gpu:h100:3")
    slurm.sbatch("-A", "proj-x", "--gres=gpu:1")
    idle_gpus = IdleCollector([f"GPU-{k}" for k in range(4)])
    poll_hour(agent(live_server.url, token, node.name, tmp_path, idle_gpus,
                    SlurmSource(slurm.node, env=slurm.env)))
    slurm.cancel_all()
    client.force_login(operator)
    held = usage_hour(client, "vision")
    assert held["allocated_gpu_hours"] == pytest.approx(3.0)  # a sleeping job holds three
    assert held["busy_gpu_hours"] == 0.0
    assert usage_hour(client, "speech")["allocated_gpu_hours"] == pytest.approx(1.0)
    [vision] = [c for c in alerts.idle_conditions(HOUR + timedelta(minutes=90), [])
                if c.tenant_id == tenant.pk]
    assert vision.details["gpus"] == [f"hpc-node-01/{k} (job {job} (team-a))" for k in range(3)]


def test_with_the_controller_down_samples_are_marked_and_it_is_said_once(slurm, caplog):
    slurm.cancel_all()
    slurm.sbatch("-A", "team-a", "--gres=gpu:1")
    holders = Holders(SlurmSource(slurm.node, env=slurm.env), every=0)
    busy = [Reading(uuid="GPU-0", index=0, processes=(Process(pid=7, owner={"job": "9"}),))]
    assert holders.apply(busy)[0].owner["account"] == "team-a"
    slurm.stop_controller()
    try:
        with caplog.at_level(logging.WARNING, logger="gpuloans-agent"):
            down = [holders.apply(busy)[0] for _ in range(2)]
            with pytest.raises(HolderError):
                SlurmSource(slurm.node, env=slurm.env).read()
    finally:
        slurm.start_controller(clear=False)
    assert all(r.holder_unknown and not r.allocated for r in down)
    assert len([m for m in caplog.messages if "cannot read who holds" in m]) == 1
    assert holders.apply(busy)[0].owner["account"] == "team-a"  # the job ran on meanwhile
    slurm.restart_node()


def mig_node() -> list[Reading]:
    """GPU 0 split into two MIG instances, GPUs 1 and 2 whole: four GPU devices to Slurm."""
    return [Reading(uuid="MIG-0a", index=0, fraction=3 / 7, parent="GPU-0"),
            Reading(uuid="MIG-0b", index=0, fraction=4 / 7, parent="GPU-0"),
            Reading(uuid="GPU-1", index=1), Reading(uuid="GPU-2", index=2)]


def test_slurm_counts_a_mig_instance_as_a_gpu_device_of_its_own():
    assert slurm_slots(mig_node()) == [0, 1, 2, 3]
    whole_and_parts = [Reading(uuid="GPU-0", index=0)] + mig_node()
    assert slurm_slots(whole_and_parts) == [None, 0, 1, 2, 3]  # the parts, not the whole
    assert slurm_slots([Reading(uuid="GPU-9", index=None)]) == [None]


@pytest.mark.parametrize("records", [False, True], ids=["squeue", "prolog records"])
def test_each_mig_instance_is_held_by_the_job_slurm_gave_it_on_a_real_slurm(slurm, records):
    """Slurm gives MIG instances one by one: a job given IDX 0 holds the first instance of
    GPU 0, not every instance at index 0 (each was held by any job on that GPU)."""
    slurm.cancel_all()
    one = slurm.sbatch("-A", "team-a", "--gres=gpu:1")
    three = slurm.sbatch("-A", "proj-x", "--gres=gpu:3")
    given = {gpu: job.job for job in jobs_on(slurm.command("squeue", "--json").stdout,
                                             slurm.node) for gpu in job.gpus}
    assert sorted(given) == [0, 1, 2, 3] and set(given.values()) == {one, three}
    source = SlurmRecordsSource(slurm.records) if records else SlurmSource(slurm.node,
                                                                           env=slurm.env)
    jobs = [(r.owner or {}).get("job") for r in source.read().apply(mig_node())]
    assert jobs == [given[0], given[1], given[2], given[3]]  # MIG-0a, MIG-0b, GPU-1, GPU-2
    slurm.cancel_all()


def _submit(slurm, account: str, gpus: int, seconds: int) -> str:
    done = slurm.command("sbatch", "--parsable", "-c1", "-o", "/dev/null", "-A", account,
                         f"--gres=gpu:{gpus}", "--wrap", f"sleep {seconds}")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def test_jobs_starting_and_ending_mid_interval_are_metered_to_the_second_of_sacct(slurm):
    """Polled every 5 s with 20 s samples, as the agent polls, from the prolog's records: each
    job's GPU time starts, ends and sums within a second of what Slurm's accounting says (the
    split between polls put the start up to 2.5 s off). Job B starts in the last poll gap of
    an interval and so is seen first in the next one."""
    slurm.cancel_all()
    holders = Holders(SlurmRecordsSource(slurm.records), every=0)
    collector = IdleCollector([f"GPU-{k}" for k in range(4)])
    aggregator, samples = Aggregator(20), []
    now = datetime.now(UTC).timestamp()
    t0 = now - now % 20 + 20.2

    def poll_at(offset: float) -> None:
        time.sleep(max(0.0, t0 + offset - datetime.now(UTC).timestamp()))
        moment = datetime.now(UTC)
        aggregator.add(holders.apply(collector.poll()), moment)
        samples.extend(aggregator.completed(moment))

    poll_at(0)
    a = _submit(slurm, "team-a", 2, 8)
    for offset in (5, 10, 15):
        poll_at(offset)
    b = _submit(slurm, "proj-x", 1, 9)
    for offset in (20, 25, 30, 35, 40):
        poll_at(offset)
    slurm.cancel_all()
    accounted = slurm.command("sacct", "-X", "-n", "-P", "-j", f"{a},{b}", "-o",
                              "JobID,Start,End", env={"SLURM_TIME_FORMAT": "%s"})
    times = {job: (int(start), int(end)) for job, start, end in
             (line.split("|") for line in accounted.stdout.split())}
    for job, gpus in ((a, 2), (b, 1)):
        start, end = times[job]
        parts: dict[str, list[tuple[float, float]]] = {}
        for s in samples:
            if (s["owner"] or {}).get("job") == job:
                first = datetime.fromisoformat(s["ts"]).timestamp()
                parts.setdefault(s["gpu_uuid"], []).append((first, first + s["interval_s"]))
        assert len(parts) == gpus, (job, parts)
        for gpu, spans in parts.items():
            held = sum(last - first for first, last in spans)
            assert abs(held - (end - start)) <= 1, (job, gpu, spans, start, end)
            assert abs(min(f for f, _ in spans) - start) <= 1, (job, gpu, spans, start)
            assert abs(max(last for _, last in spans) - end) <= 1, (job, gpu, spans, end)
