"""The Slurm allocation source: its reading of `scontrol show job --details --oneliner`, and
against a real Slurm (tests/slurm.py) with real sbatch jobs; end to end: agent -> server ->
usage API."""

import logging
from datetime import timedelta

import pytest

from agent.holders import HolderError, Holders
from agent.holders.slurm import SlurmSource, expand_hostlist, indices, jobs_on
from agent.readings import Process, Reading
from loans.services import alerts
from metering.models import AttributionRule, Cluster
from metering.models import Node as MeterNode
from tests.agent.holding import HOUR, IdleCollector, agent, poll_hour, usage_hour

# One job as Slurm 22.05 prints it (scontrol show job --details --oneliner), cut short.
LINE = ("JobId=1 JobName=wrap UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A "
        "Priority=4294901759 Nice=0 Account=team-a QOS=(null) JobState=RUNNING Reason=None "
        "Partition=debug NodeList=vm BatchHost=vm NumNodes=1 TRES=cpu=1,node=1,billing=1 "
        "JOB_GRES=gpu:h100:2   Nodes=vm CPU_IDs=0 Mem=0 GRES=gpu:h100:2(IDX:0-1) "
        "MinCPUsNode=1 Features=(null) TresPerNode=gres:gpu:h100:2 ")


def test_a_running_jobs_gpus_on_this_node_are_held_by_its_account_user_and_id():
    [job] = jobs_on(LINE, "vm")
    assert (job.job, job.account, job.user, job.partition, job.gpus) == (
        "1", "team-a", "alice", "debug", (0, 1))
    assert job.owner == {"account": "team-a", "user": "alice", "job": "1"}
    assert jobs_on(LINE, "other-node") == []


def test_a_job_over_several_nodes_holds_what_it_got_on_each():
    line = ("JobId=42 UserId=bob(1001) Account=proj-x JobState=RUNNING Partition=gpu "
            "NodeList=gpu[01-02] JOB_GRES=gpu:4 "
            "  Nodes=gpu01 CPU_IDs=0-3 Mem=0 GRES=gpu:a100:4(IDX:0-3) "
            "  Nodes=gpu02 CPU_IDs=0-1 Mem=0 GRES=gpu:a100:1(IDX:5),gpu:h100:1(IDX:7) "
            "MinCPUsNode=1")
    assert jobs_on(line, "gpu01")[0].gpus == (0, 1, 2, 3)
    assert jobs_on(line, "gpu02")[0].gpus == (5, 7)


@pytest.mark.parametrize("state", ["PENDING", "COMPLETED", "CANCELLED", "FAILED"])
def test_jobs_that_hold_nothing_now_are_left_out(state):
    assert jobs_on(LINE.replace("JobState=RUNNING", f"JobState={state}"), "vm") == []


def test_a_job_without_gpus_and_text_that_is_no_job_are_left_out():
    assert jobs_on(LINE.replace("GRES=gpu:h100:2(IDX:0-1)", "GRES="), "vm") == []
    assert jobs_on("No jobs in the system\n", "vm") == []


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


def test_the_gpus_of_real_jobs_are_held_by_them(slurm):
    slurm.cancel_all()
    first = slurm.sbatch("-A", "team-a", f"--gres=gpu:{'h100'}:2")
    second = slurm.sbatch("-A", "proj-x", "--gres=gpu:1")
    source = SlurmSource(slurm.node, env=slurm.env)
    seen = source.read().apply(idle() + [Reading(uuid="MIG-x", index=0, fraction=1 / 7)])
    owners = [r.owner for r in seen]
    assert owners[:2] == [{"account": "team-a", "user": "root", "job": first}] * 2
    assert owners[2] == {"account": "proj-x", "user": "root", "job": second}
    assert owners[3] is None and not seen[3].allocated
    assert owners[4] == owners[0]  # a MIG instance of GPU 0 is held with it
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
    slurm.cancel_all()
