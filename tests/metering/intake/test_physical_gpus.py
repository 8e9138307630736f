"""A node bills only the physical GPUs it has, at the times it had them (DESIGN.md, "Trust"):
MIG instances and replicas are parts of one GPU whose fractions sum to at most 1 at every
instant, the device limit holds in every hour a batch covers, a device crosses clusters only
by an operator's move, and the hours a node spooled before a device moved away stay its own."""

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from loans.models import Alert
from loans.services.alerts.conditions import evaluate_alerts
from metering.intake.ingest import forget_gpus
from metering.models import Cluster, DeviceRefusal, Gpu, GpuHour, Node, TenantHour, UsageSample
from metering.usage import fleet
from tests.helpers import assert_rollups_equal_a_recount
from tests.metering.intake.test_ingest_api import iso, minute, post, sample

HOUR = timedelta(hours=1)


def billed(tenant) -> float:
    return sum(TenantHour.objects.filter(tenant=tenant).values_list("allocated_gpu_s",
                                                                  flat=True)) / 3600


def test_mig_instances_claiming_a_whole_gpu_each_bill_one_gpu(client, token, node, tenant):
    """51 MIG instances at one index, each sent as a whole GPU for an hour, billed 51 GPU-h on
    a node allowed one GPU: now the first is kept and the rest pass the GPU's one."""
    Node.objects.filter(pk=node.pk).update(max_devices=1)
    start = minute(0).replace(minute=0) - HOUR
    batch = [sample(0, 0, gpu_uuid=f"MIG-{k:04d}", gpu_index=0, fraction=1.0,
                    ts=iso(start), interval_s=3600) for k in range(51)]
    answer = post(client, token, batch).json()
    assert answer["accepted"] == 1 and len(answer["rejected"]) == 50
    assert "past one GPU" in answer["rejected"][0]["error"]
    assert billed(tenant) == pytest.approx(1.0)
    assert_rollups_equal_a_recount()


def test_replicas_of_one_gpu_bill_at_most_that_gpu(client, token, node, tenant):
    """Time-sliced replicas (`GPU-x::k`) are parts of GPU-x: four replicas at 1.0 each bill
    one GPU, four at 0.25 each bill one GPU too, and a fifth at 0.25 is refused."""
    whole = [sample(0, 0, gpu_uuid=f"GPU-0000::{k}", fraction=1.0) for k in range(4)]
    answer = post(client, token, whole).json()
    assert answer["accepted"] == 1
    quarters = [sample(0, 1, gpu_uuid=f"GPU-0000::{k}", fraction=0.25) for k in range(5)]
    answer = post(client, token, quarters).json()
    assert answer["accepted"] == 4 and [r["index"] for r in answer["rejected"]] == [4]
    assert billed(tenant) == pytest.approx(2 / 60)
    replica = Gpu.objects.get(uuid="GPU-0000::0")
    assert replica.physical.uuid == "GPU-0000" and replica.physical.shared


def test_a_gpu_stored_whole_then_as_replicas_counts_once(client, token, node, tenant):
    """The kubelet socket appearing after the agent started: GPU-0 was reported whole, then as
    two replicas. In the same minute the replicas pass the GPU; in capacity it is one GPU."""
    assert post(client, token, [sample(0, 0)]).json()["accepted"] == 1
    replicas = [sample(0, 0, gpu_uuid=f"GPU-0000::{k}", fraction=0.5) for k in range(2)]
    answer = post(client, token, replicas).json()
    assert answer["accepted"] == 0  # the whole GPU already holds that minute
    later = [sample(0, 1, gpu_uuid=f"GPU-0000::{k}", fraction=0.5) for k in range(2)]
    assert post(client, token, later).json()["accepted"] == 2
    assert billed(tenant) == pytest.approx(2 / 60)
    assert fleet.gpus_by_model(timezone.now() - timedelta(days=1)) == {
        "NVIDIA H100 80GB HBM3": 1.0}


def test_the_agent_names_a_mig_instances_parent_and_it_must_be_this_nodes(client, token, node,
                                                                          tenant):
    other = Node.objects.create(name="gpu-node-02")
    assert post(client, other.issue_token(), [sample(5, 0)], node="gpu-node-02").json()[
        "accepted"] == 1
    mine = sample(0, 0, gpu_uuid="MIG-aaaa", gpu_index=0, fraction=3 / 7,
                  parent_uuid="GPU-0000")
    stolen = sample(5, 0, gpu_uuid="MIG-bbbb", gpu_index=5, fraction=3 / 7,
                    parent_uuid="GPU-0005")
    answer = post(client, token, [mine, stolen]).json()
    assert answer["accepted"] == 1
    assert answer["rejected"] == [{"index": 1, "error": (
        "parent: MIG-bbbb's GPU GPU-0005 is reported by node gpu-node-02")}]
    assert Gpu.objects.get(uuid="MIG-aaaa").physical.uuid == "GPU-0000"
    assert DeviceRefusal.objects.get().reason == "parent"


def test_back_dated_made_up_devices_are_refused_in_the_hours_the_node_was_full(
        client, token, node, tenant):
    """16 made-up devices with 34 days of hourly samples put 13,040 GPU-h on a tenant: the
    limit was checked against the last 24 h at arrival. Now it holds in every hour."""
    Node.objects.filter(pk=node.pk).update(max_devices=2)
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    hours = [now - HOUR * k for k in range(1, 49)]
    real = [sample(g, 0, ts=iso(hour), interval_s=3600) for hour in hours for g in (0, 1)]
    assert post(client, token, real).json()["accepted"] == 96
    made_up = [sample(g, 0, gpu_uuid=f"FAKE-{g}", ts=iso(hour), interval_s=3600)
               for hour in hours for g in range(16)]
    for day in range(2):  # and the same node again a day later
        with time_machine.travel(timezone.now() + timedelta(days=day), tick=False):
            forget_gpus()
            answer = post(client, token, made_up).json()
        assert answer["accepted"] == 0 and len(answer["rejected"]) == len(made_up)
    assert billed(tenant) == pytest.approx(96.0)
    assert not Gpu.objects.filter(uuid__startswith="FAKE-").exists()
    per_hour = {}
    for hour, gpu in GpuHour.objects.values_list("hour", "gpu_id"):
        per_hour.setdefault(hour, set()).add(gpu)
    assert max(len(gpus) for gpus in per_hour.values()) == 2


def test_a_refused_batch_of_thousands_costs_the_queries_of_a_few(client, token, node):
    """5,000 devices past the limit cost a query each (11-26 s a batch) and opened an alert
    each; now the queries do not grow with the devices, and there is one alert a node. The
    batches' minutes stay inside one hour (at :58 of an hour they crossed into the next, whose
    first refusal writes its row, and the counts differed)."""
    with time_machine.travel(timezone.now().replace(minute=10, second=0, microsecond=0),
                             tick=False):
        _refused_batches(client, token, node)


def _refused_batches(client, token, node):
    Node.objects.filter(pk=node.pk).update(max_devices=1)
    assert post(client, token, [sample(0, 0)]).json()["accepted"] == 1

    def queries(devices: int, k: int) -> int:
        forget_gpus()
        batch = [sample(0, k, gpu_uuid=f"FAKE-{d}") for d in range(devices)]
        with CaptureQueriesContext(connection) as seen:
            answer = post(client, token, batch).json()
        assert answer["accepted"] == 0
        return len(seen)

    queries(50, 1)  # the first refusal writes its row
    few = queries(50, 2)
    assert queries(5000, 3) == few
    refusal = DeviceRefusal.objects.get()
    assert (refusal.devices, refusal.samples) == (5000, 5100)
    evaluate_alerts(timezone.now())
    assert Alert.objects.filter(kind="device_refused").count() == 1


def test_a_device_silent_for_the_move_window_does_not_change_cluster(client, tenant):
    """A node of another cluster took a GPU after 10 silent minutes, back-filled its gaps under
    its own cluster's rules and refused its owner's return. Now it cannot take it at all."""
    prod, lab = Cluster.objects.create(name="prod"), Cluster.objects.create(name="lab")
    owner = Node.objects.create(name="prod-01", cluster=prod)
    thief = Node.objects.create(name="lab-01", cluster=lab)
    owner_token, thief_token = owner.issue_token(), thief.issue_token()
    assert post(client, owner_token, [sample(0, 0)], node="prod-01").json()["accepted"] == 1
    with time_machine.travel(timezone.now() + timedelta(minutes=30), tick=False):
        forget_gpus()
        answer = post(client, thief_token, [sample(0, 5)], node="lab-01").json()
        assert answer["accepted"] == 0
        assert answer["rejected"][0]["error"] == (
            "reported by node prod-01 of another cluster: GPU-0000 moves to this node only "
            "when an operator moves it")
        assert post(client, owner_token, [sample(0, 6)], node="prod-01").json()[
            "accepted"] == 1
    assert Gpu.objects.get(uuid="GPU-0000").node == owner
    assert DeviceRefusal.objects.get().reason == "other_cluster"


def test_the_old_nodes_spooled_hours_from_before_a_move_are_accepted(client, tenant):
    """After a GPU moved, the old node's spooled samples from before the move were refused and
    the agent dropped them: 2.0 GPU-h billed where 4.0 were used."""
    first, second = (Node.objects.create(name=f"node-{k}", default_tenant=tenant)
                     for k in (1, 2))
    tokens = {n.name: n.issue_token() for n in (first, second)}
    start = minute(0).replace(minute=0) - 4 * HOUR
    assert post(client, tokens["node-1"], [sample(0, 0, ts=iso(start), interval_s=3600)],
                node="node-1").json()["accepted"] == 1
    with time_machine.travel(timezone.now() + timedelta(minutes=30), tick=False):
        forget_gpus()
        moved = post(client, tokens["node-2"],
                     [sample(0, 0, ts=iso(start + 2 * HOUR), interval_s=3600),
                      sample(0, 0, ts=iso(start + 3 * HOUR), interval_s=3600)],
                     node="node-2").json()
        assert moved["accepted"] == 2
        forget_gpus()
        spooled = post(client, tokens["node-1"],
                       [sample(0, 0, ts=iso(start + HOUR), interval_s=3600)],
                       node="node-1").json()
        assert spooled == {"accepted": 1, "duplicates": 0, "rejected": []}
        # Later than the move it is still refused: the GPU is the other node's now.
        late = post(client, tokens["node-1"],
                    [sample(0, 0, ts=iso(start + 3 * HOUR), interval_s=60)],
                    node="node-1").json()
        assert late["accepted"] == 0
    assert billed(tenant) == pytest.approx(4.0)
    assert UsageSample.objects.count() == 4


def test_mig_switched_on_counts_one_gpu_in_the_pool_and_fourteen_instances_fit_two(
        client, token, node):
    """The whole GPU and then its seven slices counted two GPUs in the capacity window (a
    burst of 2 granted on one GPU), and a node's 14 MIG instances hit its device limit."""
    Node.objects.filter(pk=node.pk).update(max_devices=2)
    assert post(client, token, [sample(0, 0), sample(1, 0)]).json()["accepted"] == 2
    slices = [sample(g, 1, gpu_uuid=f"MIG-{g}-{k}", gpu_index=g, fraction=1 / 7)
              for g in (0, 1) for k in range(7)]
    assert post(client, token, slices).json()["accepted"] == 14
    assert fleet.gpus_by_model(timezone.now() - timedelta(days=1)) == {
        "NVIDIA H100 80GB HBM3": 2.0}
    assert {g.physical.uuid for g in Gpu.objects.filter(uuid__startswith="MIG-")} == {
        "GPU-0000", "GPU-0001"}


def test_an_operator_moves_a_gpu_into_another_cluster_with_its_parts(client, operator, tenant):
    prod, lab = Cluster.objects.create(name="prod"), Cluster.objects.create(name="lab")
    old = Node.objects.create(name="prod-01", cluster=prod)
    new = Node.objects.create(name="lab-01", cluster=lab)
    old_token, new_token = old.issue_token(), new.issue_token()
    parts = [sample(0, 0, gpu_uuid=f"GPU-0000::{k}", fraction=0.5) for k in range(2)]
    assert post(client, old_token, parts, node="prod-01").json()["accepted"] == 2
    client.force_login(operator)
    gpu = Gpu.objects.get(uuid="GPU-0000::0")
    answer = client.post("/en/admin/metering/gpu/", {
        "action": "move_to_node", "_selected_action": [gpu.pk], "node": new.pk, "index": 0})
    assert answer.status_code == 302
    # The physical GPU and both replicas moved; the old node keeps its minute.
    assert set(Gpu.objects.values_list("uuid", "node__name")) == {
        ("GPU-0000", "lab-01"), ("GPU-0000::0", "lab-01"), ("GPU-0000::1", "lab-01")}
    later = [sample(0, 1, gpu_uuid=f"GPU-0000::{k}", fraction=0.5) for k in range(2)]
    assert post(client, new_token, later, node="lab-01").json()["accepted"] == 2
    assert post(client, old_token, [sample(0, 2, gpu_uuid="GPU-0000::0", fraction=0.5)],
                node="prod-01").json()["accepted"] == 0


def test_the_move_command_says_what_it_moved_and_refuses_what_it_does_not_know(tenant):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    node = Node.objects.create(name="node-1")
    Gpu.objects.create(uuid="GPU-x", node=Node.objects.create(name="node-0"))
    out = StringIO()
    call_command("move_gpu", "GPU-x", "node-1", stdout=out)
    assert "1 devices of GPU-x moved to node-1" in out.getvalue()
    assert Gpu.objects.get(uuid="GPU-x").node == node
    with pytest.raises(CommandError, match="No GPU 'GPU-y' has reported"):
        call_command("move_gpu", "GPU-y", "node-1")
    with pytest.raises(CommandError, match="No node 'node-9'"):
        call_command("move_gpu", "GPU-x", "node-9")


def test_a_gpu_and_its_mig_instances_in_one_first_batch_are_one_gpu(client, token, node,
                                                                    tenant):
    """Sent together before either was registered, without parent_uuid: the instances were
    parts of `index:0@node`, a second physical GPU (1.999999 GPU-h for one hour, and two H100s
    in the pool). The GPU at their index in the same batch is their parent."""
    start = minute(0).replace(minute=0) - HOUR
    batch = [sample(0, 0, ts=iso(start), interval_s=3600),
             *(sample(0, 0, gpu_uuid=f"MIG-{k}", gpu_index=0, fraction=3 / 7, ts=iso(start),
                      interval_s=3600) for k in range(2))]
    answer = post(client, token, batch).json()
    assert answer["accepted"] == 1 and len(answer["rejected"]) == 2  # the GPU holds the hour
    assert billed(tenant) == pytest.approx(1.0)
    assert {g.physical.uuid for g in Gpu.objects.filter(uuid__startswith="MIG-")} == {"GPU-0000"}
    assert not Gpu.objects.filter(uuid__startswith="index:").exists()
    assert fleet.gpus_by_model(timezone.now() - timedelta(days=1)) == {
        "NVIDIA H100 80GB HBM3": 1.0}
    assert_rollups_equal_a_recount()


@pytest.mark.parametrize("order", ["chain", "chain reversed", "cycle"])
def test_a_part_is_never_a_parent_whatever_the_batch_order(client, token, node, order):
    """C1's parent C2 and C2's parent C1 (a cycle), D1 -> D2 -> D3 (a chain) were stored."""
    links = {"chain": [("D1", "D2"), ("D2", "D3")],
             "chain reversed": [("D2", "D3"), ("D1", "D2")],
             "cycle": [("C1", "C2"), ("C2", "C1")]}[order]
    batch = [sample(0, 0, gpu_uuid=f"GPU-{child}", parent_uuid=f"GPU-{parent}", fraction=0.5)
             for child, parent in links]
    answer = post(client, token, batch).json()
    refused = {batch[r["index"]]["gpu_uuid"] for r in answer["rejected"]}
    assert all("is a part of a GPU, not a GPU" in r["error"] for r in answer["rejected"])
    for gpu in Gpu.objects.filter(physical__isnull=False).select_related("physical"):
        assert gpu.physical.physical_id is None  # no chain
    assert refused == ({"GPU-C1", "GPU-C2"} if order == "cycle" else {"GPU-D1"})


def test_a_gpu_another_node_named_as_a_parent_is_a_conflict_both_nodes_are_told_of(
        client, tenant, operator):
    """Node rt4-e of another cluster named GPU-future as a parent and was accepted; when rt4-a
    reported that GPU whole it was refused as "of another cluster", silently. Now operators
    are alerted, naming both nodes, and the fleet page offers the move."""
    east = Cluster.objects.create(name="east")
    squatter = Node.objects.create(name="rt4-e", cluster=east, default_tenant=tenant)
    owner = Node.objects.create(name="rt4-a", default_tenant=tenant)
    named = sample(0, 0, gpu_uuid="MIG-squat", gpu_index=0, fraction=3 / 7,
                   parent_uuid="GPU-future")
    assert post(client, squatter.issue_token(), [named], node="rt4-e").json()["accepted"] == 1
    answer = post(client, owner.issue_token(), [sample(0, 1, gpu_uuid="GPU-future")],
                  node="rt4-a").json()
    assert answer["accepted"] == 0
    assert answer["rejected"][0]["error"] == (
        "named as the parent of its devices by node rt4-e first: GPU-future is reported here "
        "once an operator moves it to this node")
    evaluate_alerts(timezone.now())
    alert = Alert.objects.get(kind="device_refused", subject="node:rt4-a:parent_claim")
    assert "rt4-a reports GPU GPU-future, which node rt4-e named as the parent" in alert.message
    client.force_login(operator)
    page = client.get("/en/fleet/").content.decode()
    assert "Move GPU-future to rt4-a" in page and "?q=GPU-future" in page
