"""The kubelet allocation source against a real gRPC server speaking the published
pod-resources v1 API on a unix socket (agent.holders.stand_in), through the agent's real client;
and end to end: agent -> server -> usage API."""

import logging
import socket
import time
from datetime import timedelta
from pathlib import Path

import pytest

from agent.aggregate import Aggregator
from agent.holders import HolderError, Holders
from agent.holders.kubelet import KubeletSource
from agent.holders.stand_in import Assignment, Node, serve
from agent.readings import Process, Reading
from loans.services.alerts import conditions as alerts
from metering.models import AttributionRule, Cluster, GpuHour
from metering.models import Node as MeterNode
from tests.agent.holding import HOUR, IdleCollector, agent, poll_hour, usage_hour

GPUS = [f"GPU-0000000{k}-aaaa-bbbb-cccc-dddddddddddd" for k in range(4)]
MIG = "MIG-11111111-2222-3333-4444-555555555555"


@pytest.fixture
def kubelet(tmp_path):
    """A stand-in kubelet on a socket of its own; yields (socket path, what it serves)."""
    node = Node(allocatable={"nvidia.com/gpu": GPUS[:3] + [f"{GPUS[3]}::{n}" for n in range(4)],
                             "nvidia.com/mig-1g.10gb": [MIG]})
    path = str(tmp_path / "kubelet.sock")
    server = serve(path, node)
    yield path, node
    server.stop(None)


def reading(uuid: str, index: int, **fields) -> Reading:
    return Reading(uuid=uuid, index=index, util_pct=50.0, **fields)


def test_a_device_assigned_to_a_container_is_held_by_it_with_or_without_a_process(kubelet):
    path, node = kubelet
    node.assignments = [Assignment("team-a", "train-0", "worker", [GPUS[0], GPUS[1]]),
                        Assignment("research", "notebook", "main", [MIG],
                                   resource="nvidia.com/mig-1g.10gb")]
    busy_but_unassigned = reading(GPUS[2], 2, processes=(Process(pid=7),))
    seen = KubeletSource(path).read().apply([
        reading(GPUS[0], 0), reading(GPUS[1], 1), busy_but_unassigned,
        reading(MIG, 0, fraction=1 / 7)])
    assert [(r.uuid, r.allocated, r.owner) for r in seen] == [
        (GPUS[0], True, {"namespace": "team-a", "pod": "train-0", "container": "worker"}),
        (GPUS[1], True, {"namespace": "team-a", "pod": "train-0", "container": "worker"}),
        (GPUS[2], False, None),  # a process the kubelet gave no GPU to: not a holder
        (MIG, True, {"namespace": "research", "pod": "notebook", "container": "main"}),
    ]
    assert seen[3].fraction == pytest.approx(1 / 7)


def test_time_sliced_replicas_are_devices_of_their_own_at_one_share_each(kubelet):
    path, node = kubelet
    node.assignments = [Assignment("team-a", "a", "c", [f"{GPUS[3]}::1"]),
                        Assignment("team-b", "b", "c", [f"{GPUS[3]}::3"])]
    seen = KubeletSource(path).read().apply([reading(GPUS[3], 3)])
    assert [(r.uuid, r.fraction, r.owner and r.owner["pod"]) for r in seen] == [
        (f"{GPUS[3]}::0", 0.25, None), (f"{GPUS[3]}::1", 0.25, "a"),
        (f"{GPUS[3]}::2", 0.25, None), (f"{GPUS[3]}::3", 0.25, "b")]
    assert [r.allocated for r in seen] == [False, True, False, True]
    assert all(r.util_pct == 50.0 for r in seen)  # the GPU's own reading, for each replica
    assert {r.parent for r in seen} == {GPUS[3]}  # parts of one physical GPU


def test_the_device_plugins_index_names_are_understood(kubelet):
    path, node = kubelet
    node.allocatable = {"nvidia.com/gpu": ["0", "1"]}
    node.assignments = [Assignment("team-a", "p", "c", ["1"])]
    seen = KubeletSource(path).read().apply([reading(GPUS[0], 0), reading(GPUS[1], 1)])
    assert [r.allocated for r in seen] == [False, True]


def test_other_resources_are_not_gpus(kubelet):
    path, node = kubelet
    node.assignments = [Assignment("team-a", "p", "c", [GPUS[0]], resource="example.com/nic")]
    assert not KubeletSource(path).read().apply([reading(GPUS[0], 0)])[0].allocated


def test_a_missing_socket_is_said_once_and_the_samples_are_marked_not_guessed(tmp_path,
                                                                             caplog):
    holders = Holders(KubeletSource(str(tmp_path / "gone.sock")), every=0)
    busy = [reading(GPUS[0], 0, processes=(Process(pid=7, owner={"user": "alice"}),))]
    with caplog.at_level(logging.ERROR, logger="gpuloans-agent"):
        first, second = holders.apply(busy), holders.apply(busy)
    assert [m for m in caplog.messages if "cannot read who holds" in m] == [caplog.messages[0]]
    assert "no kubelet pod-resources socket" in caplog.messages[0]
    for seen in (first, second):  # never the processes' view instead
        assert seen[0].holder_unknown and not seen[0].allocated and seen[0].owner is None
    aggregator = Aggregator(60)
    aggregator.add(first, HOUR)
    [sample] = aggregator.completed(HOUR.replace(minute=1))
    assert sample["holder_unknown"] is True and sample["allocated"] is False


def test_a_kubelet_that_goes_away_keeps_the_replicas_it_knew_and_says_when_it_is_back(
        kubelet, caplog):
    path, node = kubelet
    server_holders = Holders(KubeletSource(path), every=0)
    assert len(server_holders.apply([reading(GPUS[3], 3)])) == 4
    Path(path).rename(path + ".away")
    with caplog.at_level(logging.WARNING, logger="gpuloans-agent"):
        away = server_holders.apply([reading(GPUS[3], 3)])
        Path(path + ".away").rename(path)
        back = server_holders.apply([reading(GPUS[3], 3)])
    assert [r.uuid for r in away] == [r.uuid for r in back]  # the same four devices
    assert all(r.holder_unknown for r in away) and not any(r.holder_unknown for r in back)
    assert any("answers again" in m for m in caplog.messages)


def test_a_kubelet_restarted_on_its_socket_is_read_again_at_once(tmp_path):
    """The agent waited out gRPC's reconnect backoff after a restart (17-22 s after a 49 s
    outage), every sample meanwhile unbilled. The server is killed and started again."""
    node = Node(allocatable={"nvidia.com/gpu": GPUS[:1]},
                assignments=[Assignment("team-a", "train-0", "worker", [GPUS[0]])])
    path = str(tmp_path / "kubelet.sock")
    source = KubeletSource(path)
    server = serve(path, node)
    assert source.read().owners[GPUS[0]]["pod"] == "train-0"
    server.stop(None).wait()
    # As a killed kubelet leaves it: its socket file, with nobody listening.
    Path(path).unlink(missing_ok=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()
    # Half a minute down, asked at the agent's own pace (every 15 s): long enough for gRPC's
    # backoff to grow (the old channel then found the kubelet back 2 to 12 s late).
    for _ in range(2):
        with pytest.raises(HolderError):
            source.read()
        time.sleep(15)
    Path(path).unlink()  # the kubelet, started again, makes its socket anew
    server = serve(path, node)
    try:
        back = time.monotonic()
        while True:
            try:
                source.read()
                break
            except HolderError:
                assert time.monotonic() - back < 2, "the kubelet was back, unread"
                time.sleep(0.1)
    finally:
        server.stop(None)


def test_a_gpu_two_pods_list_goes_to_one_by_a_stated_rule_and_is_said_once(kubelet, caplog):
    path, node = kubelet
    node.assignments = [Assignment("zeta", "b", "c", [GPUS[0]]),
                        Assignment("alpha", "a", "c", [GPUS[0]])]
    source = KubeletSource(path)
    with caplog.at_level(logging.WARNING, logger="gpuloans-agent"):
        owners = [source.read().owners[GPUS[0]] for _ in range(3)]
        node.assignments.reverse()  # the kubelet promises no order
        owners.append(source.read().owners[GPUS[0]])
    assert {o["namespace"] for o in owners} == {"alpha"}
    assert len([m for m in caplog.messages if "for 2 containers" in m]) == 1


def test_the_source_is_asked_at_most_every_so_often(kubelet):
    path, node = kubelet
    clock = [0.0]
    holders = Holders(KubeletSource(path), every=15, clock=lambda: clock[0])
    for moment in (0, 5, 10, 15, 20):
        clock[0] = moment
        holders.apply([reading(GPUS[0], 0)])
    assert node.calls == 2


def test_an_unreadable_answer_is_a_holder_error(tmp_path):
    path = tmp_path / "not-grpc.sock"
    import socket

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    try:
        with pytest.raises(HolderError, match="kubelet at"):
            KubeletSource(str(path)).read()
    finally:
        listener.close()


@pytest.fixture
def metered(transactional_db, tenant, other_tenant):
    """A node of a Kubernetes cluster whose namespace team-a is the tenant's and team-b the
    other tenant's."""
    cluster = Cluster.objects.create(name="k8s-prod", kind=Cluster.Kind.KUBERNETES)
    node = MeterNode.objects.create(name="gpu-node-07", cluster=cluster)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.NAMESPACE)
    AttributionRule.objects.create(tenant=other_tenant, cluster=cluster, value="team-b",
                                   field=AttributionRule.Field.NAMESPACE)
    return node, node.issue_token()


def test_a_pod_holding_gpus_with_no_process_is_billed_for_each_of_them_end_to_end(
        metered, kubelet, tmp_path, live_server, client, operator, tenant):
    node, token = metered
    path, served = kubelet
    served.assignments = [Assignment("team-a", "train-0", "worker", GPUS[:3]),
                          Assignment("team-b", "eval", "main", [f"{GPUS[3]}::2"])]
    idle = IdleCollector(GPUS)
    poll_hour(agent(live_server.url, token, node.name, tmp_path, idle, KubeletSource(path)))
    client.force_login(operator)
    held = usage_hour(client, "vision")
    assert held["allocated_gpu_hours"] == pytest.approx(3.0)  # three GPUs, no process on any
    assert held["busy_gpu_hours"] == 0.0
    assert usage_hour(client, "speech")["allocated_gpu_hours"] == pytest.approx(0.25)

    # The alert names the pod that held them idle.
    conditions = alerts.idle_conditions(HOUR + timedelta(minutes=90), [])
    [vision] = [c for c in conditions if c.tenant_id == tenant.pk]
    assert vision.details["gpus"] == [f"gpu-node-07/{k} (team-a/train-0)" for k in range(3)]
    assert "team-a/train-0" in vision.wording.english


def test_while_the_kubelet_cannot_be_read_the_hours_count_as_missing_not_idle(
        metered, tmp_path, live_server):
    node, token = metered
    idle = IdleCollector(GPUS[:2])
    poll_hour(agent(live_server.url, token, node.name, tmp_path, idle,
                    KubeletSource(str(tmp_path / "gone.sock"))), minutes=10)
    rows = GpuHour.objects.filter(hour=HOUR)
    assert rows.count() == 2
    assert all(r.reported_s == 0 and r.allocated_gpu_s == 0 and r.sample_count == 10
               for r in rows)


def test_the_command_line_reads_a_kubelet(kubelet, capsys):
    from agent.cli import main

    path, node = kubelet
    node.assignments = [Assignment("team-a", "p", "c", ["GPU-anything"])]
    assert main(["--collector", "fake:2", "--once", "--allocation-source", "kubelet",
                 "--kubelet-socket", path]) == 0
    out = capsys.readouterr().out
    assert '"allocated": false' in out and '"holder_unknown"' not in out

