"""Devices and what one node token may report: at most its node's device limit (a MIG
instance counting as its GPU), never a device another node still reports; a device moves to
a new node once its old one has been silent about it for the move window, and which node
reported it when is kept. Refusals reach operators as alerts."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from loans.models import Alert
from loans.services.alerts.conditions import evaluate_alerts
from metering.intake.ingest import forget_gpus
from metering.models import (
    TENURE_START,
    AttributionRule,
    Cluster,
    DeviceRefusal,
    Gpu,
    GpuTenure,
    Node,
    TenantHour,
    UsageSample,
)
from metering.services import reported_by
from tests.loans.api.test_api import api, bearer
from tests.metering.intake.test_ingest_api import minute, post, sample


@pytest.fixture
def other(db):
    node = Node.objects.create(name="gpu-node-02")
    return node, node.issue_token()


def test_a_gpu_another_node_still_reports_is_refused_and_alerted(client, token, node, other,
                                                                 settings):
    _node, other_token = other
    assert post(client, other_token, [sample(7, 0)], node="gpu-node-02").json()["accepted"] == 1
    answer = post(client, token, [sample(7, 1), sample(1, 1)]).json()
    assert answer["accepted"] == 1
    assert answer["rejected"] == [{"index": 0, "error": (
        "reported by node gpu-node-02: GPU-0007 moves to this node once gpu-node-02 has not "
        "reported it for 10 minutes")}]
    refusal = DeviceRefusal.objects.get()
    assert (refusal.reason, refusal.holder.name, refusal.samples) == ("other_node",
                                                                     "gpu-node-02", 1)
    evaluate_alerts(timezone.now())
    alert = Alert.objects.get(kind="device_refused")
    assert alert.tenant is None and "Two nodes claim one GPU" in alert.message


def test_a_gpu_moves_once_its_old_node_has_been_silent_for_the_move_window(
        client, token, node, other):
    _node, other_token = other
    post(client, other_token, [sample(7, 0)], node="gpu-node-02")
    later = timezone.now() + timedelta(minutes=11)
    with time_machine.travel(later, tick=False):
        forget_gpus()  # another worker, or this one a minute later: the cache has expired
        answer = post(client, token, [sample(7, 5)]).json()
    assert answer == {"accepted": 1, "duplicates": 0, "rejected": []}
    gpu = Gpu.objects.get(uuid="GPU-0007")
    assert gpu.node == node
    tenures = list(GpuTenure.objects.filter(gpu=gpu).values_list("node__name", "until"))
    assert tenures[0][0] == "gpu-node-02" and tenures[0][1] is not None
    assert tenures[1] == ("gpu-node-01", None)
    # The hours the old node reported stay its own.
    far = timezone.now() + timedelta(days=1)
    assert [UsageSample.objects.filter(reported_by(n, TENURE_START, far)).count()
            for n in (_node, node)] == [1, 1]


def test_a_node_reports_at_most_its_device_limit_and_mig_instances_count_as_their_gpu(
        client, token, node):
    Node.objects.filter(pk=node.pk).update(max_devices=2)
    migs = [sample(0, 0, gpu_uuid=f"MIG-{k:04d}", gpu_index=0, fraction=1 / 7) for k in range(7)]
    answer = post(client, token, [*migs, sample(1, 0), sample(2, 0), sample(3, 0)]).json()
    # Seven MIG instances of GPU 0 and GPU 1 are two GPUs; GPUs 2 and 3 are past the limit.
    assert answer["accepted"] == 8
    assert [r["index"] for r in answer["rejected"]] == [8, 9]
    assert answer["rejected"][0]["error"].startswith(
        "device limit: node gpu-node-01 may report at most 2 GPUs (max_devices) in an hour")
    assert not Gpu.objects.filter(uuid__in=["GPU-0002", "GPU-0003"]).exists()
    # A MIG instance naming no parent is part of the node's GPU at its index.
    shares = set(Gpu.objects.filter(uuid__startswith="MIG-").values_list("physical__uuid",
                                                                         "share"))
    assert shares == {("index:0@gpu-node-01", 1 / 7)}
    # One refusal, and one alert, a node and reason: not one a device.
    refusal = DeviceRefusal.objects.get(reason="device_limit")
    assert (refusal.devices, refusal.samples) == (2, 2)
    evaluate_alerts(timezone.now())
    assert Alert.objects.filter(kind="device_refused", state="open").count() == 1


def test_a_replaced_gpu_stops_counting_once_it_is_unseen_for_the_capacity_window(
        client, token, node, settings):
    Node.objects.filter(pk=node.pk).update(max_devices=1)
    assert post(client, token, [sample(0, 0)]).json()["accepted"] == 1
    assert post(client, token, [sample(1, 1)]).json()["accepted"] == 0
    later = timezone.now() + timedelta(hours=settings.CAPACITY_WINDOW_HOURS, minutes=1)
    with time_machine.travel(later, tick=False):
        forget_gpus()
        body = [{**sample(1, 0), "ts": (later - timedelta(minutes=2)).isoformat()}]
        assert post(client, token, body).json()["accepted"] == 1


def test_an_owner_rule_holds_only_for_nodes_of_its_cluster(client, tenant, other_tenant):
    prod, lab = Cluster.objects.create(name="prod"), Cluster.objects.create(name="lab")
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="team-a",
                                   cluster=prod)
    AttributionRule.objects.create(tenant=other_tenant, field="node", value="lab-01")
    in_prod = Node.objects.create(name="prod-01", cluster=prod)
    in_lab = Node.objects.create(name="lab-01", cluster=lab)
    in_lab_2 = Node.objects.create(name="lab-02", cluster=lab)
    owner = {"owner": {"namespace": "team-a"}}
    post(client, in_prod.issue_token(), [sample(1, 0, **owner)], node="prod-01")
    post(client, in_lab.issue_token(), [sample(2, 0, **owner)], node="lab-01")
    post(client, in_lab_2.issue_token(), [sample(3, 0, **owner)], node="lab-02")
    by_tenant = dict(TenantHour.objects.values_list("tenant__slug", "allocated_gpu_s"))
    # A lab node's "team-a" is not prod's team-a: its node rule or nobody claims it.
    assert by_tenant == {"vision": 60.0, "speech": 60.0, None: 60.0}


def test_operators_manage_clusters_and_put_nodes_and_rules_in_them(client, operator, tenant):
    headers = bearer(operator)
    created = api(client, "post", "/api/v1/clusters/", headers, {"name": "prod",
                                                                 "kind": "kubernetes"})
    assert created.status_code == 201, created.content
    node = api(client, "post", "/api/v1/nodes/", headers, {"name": "prod-01",
                                                           "cluster": "prod"})
    assert node.status_code == 201 and node.json()["cluster"] == "prod"
    assert api(client, "post", "/api/v1/nodes/", headers, {"name": "x-01"}).json()[
        "cluster"] == "default"
    rules = api(client, "patch", "/api/v1/tenants/vision/", headers, {"attribution_rules": [
        {"field": "namespace", "value": "team-a", "cluster": "prod"},
        {"field": "namespace", "value": "team-a"},
        {"field": "node", "value": "prod-01"}]})
    assert rules.status_code == 200, rules.content
    assert sorted((r["cluster"] or "", r["field"]) for r in rules.json()["attribution_rules"]
                  ) == [("", "node"), ("default", "namespace"), ("prod", "namespace")]
    refused = api(client, "patch", "/api/v1/tenants/vision/", headers, {"attribution_rules": [
        {"field": "node", "value": "prod-01", "cluster": "prod"}]})
    assert refused.status_code == 400 and "names no cluster" in str(refused.json())


def test_an_overlap_after_a_retry_in_the_same_transaction_is_still_refused(client, token):
    """The checked path tells the database its samples are checked; that must not outlive its
    own statement when a caller's transaction goes on (a test's, or any caller's)."""
    assert post(client, token, [sample(0, 0)]).json()["accepted"] == 1
    retry = post(client, token, [sample(0, 0), sample(0, 1)]).json()  # the checked path
    assert (retry["accepted"], retry["duplicates"]) == (1, 1)
    overlapping = sample(0, 1, ts=(minute(1) + timedelta(seconds=30)).isoformat())
    answer = post(client, token, [overlapping]).json()
    assert answer["accepted"] == 0 and answer["rejected"][0]["error"].startswith("overlap:")


def test_samples_overlapping_in_time_are_refused_whatever_their_timestamps(client, token,
                                                                          tenant):
    """Samples at 10:00:00, 10:00:30 and 10:59, each 3600 s long, used to count 3 GPU-h in
    one hour: the first is kept and the two that overlap it are refused."""
    hour = minute(0).replace(minute=0) - timedelta(hours=2)
    batch = [sample(0, 0, ts=(hour + timedelta(seconds=offset)).isoformat(), interval_s=3600)
             for offset in (0, 30, 59 * 60)]
    answer = post(client, token, batch).json()
    assert answer["accepted"] == 1
    assert [r["index"] for r in answer["rejected"]] == [1, 2]
    assert sum(TenantHour.objects.filter(tenant=tenant).values_list("allocated_gpu_s",
                                                                  flat=True)) == 3600


def test_a_sample_counts_in_the_hours_it_covers_in_proportion(client, token, tenant):
    """A 3600 s sample at 23:30 is half in that hour and half in the next (across a day and
    a month boundary too)."""
    start = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    with time_machine.travel(start + timedelta(hours=2), tick=False):
        post(client, token, [sample(0, 0, ts=start.isoformat(), interval_s=3600)])
    hours = dict(TenantHour.objects.filter(tenant=tenant).values_list("hour", "allocated_gpu_s"))
    assert hours == {datetime(2026, 11, 30, 23, tzinfo=UTC): 1800.0,
                     datetime(2026, 12, 1, 0, tzinfo=UTC): 1800.0}
    counts = dict(TenantHour.objects.filter(tenant=tenant).values_list("hour", "sample_count"))
    assert counts[datetime(2026, 11, 30, 23, tzinfo=UTC)] == 1  # counted where it starts


def test_a_peak_counts_gpus_held_at_the_same_moment_whatever_the_clocks(client, tenant):
    """Two 4-GPU nodes whose clocks differ by 7 s hold 8 GPUs at once, not 4."""
    from metering import peaks

    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision")
    first, second = (Node.objects.create(name=f"node-{k}") for k in (1, 2))
    base = minute(0)
    for node, skew in ((first, 0), (second, 7)):
        batch = [sample(g, 0, gpu_uuid=f"GPU-{node.name}-{g}",
                        ts=(base + timedelta(seconds=skew)).isoformat())
                 for g in range(4)]
        assert post(client, node.issue_token(), batch, node=node.name).json()["accepted"] == 4
    peaks.refresh_all()
    assert TenantHour.objects.get(tenant=tenant, hour=base.replace(minute=0)).peak_gpus == 8


def test_five_thousand_hostile_samples_bill_one_hour_and_no_other_cluster(client, tenant,
                                                                         other_tenant):
    """A stolen token of a lab node sending 5,000 samples a second apart, each claiming an
    hour and the namespace of a prod team, twice, used to put 10,000 GPU-h on that team's bill.
    Now the samples that overlap are refused, so the device counts its wall clock (the samples
    at 0 s and 3,600 s: two hours), a resend counts nothing, and none of it is the prod team's
    (a rule of the prod cluster does not hold for a lab node)."""
    prod, lab = Cluster.objects.create(name="prod"), Cluster.objects.create(name="lab")
    AttributionRule.objects.create(tenant=tenant, cluster=prod, field="namespace", value="vision")
    node = Node.objects.create(name="lab-01", cluster=lab)
    token = node.issue_token()
    start = minute(0) - timedelta(hours=2)
    batch = [sample(0, 0, ts=(start + timedelta(seconds=k)).isoformat(), interval_s=3600)
             for k in range(5000)]
    first, again = (post(client, token, batch, node="lab-01").json() for _ in range(2))
    assert first["accepted"] == 2 and len(first["rejected"]) == 4998
    assert again["accepted"] == 0 and again["duplicates"] == 2
    assert not TenantHour.objects.filter(tenant=tenant).exists()
    assert sum(TenantHour.objects.values_list("allocated_gpu_s", flat=True)) == 7200
