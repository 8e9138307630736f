"""Capacity as bursts see it: a pool is the GPUs of one model that reported within the
capacity window, a MIG instance as its fraction; made-up devices past a node's limit add
nothing; a plan of any model draws on one pool and never on room guaranteed to others; a burst
lies inside its contract; priority means lower first everywhere, and the manifest names the
namespace attribution tries first."""

from datetime import UTC, date, datetime, timedelta

import pytest
import yaml
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import capacity
from loans.models import BurstRequest, Contract, Plan
from loans.schedulers.kubernetes import manifests
from loans.services import bursts
from loans.services.ledger.amendments import terminate
from metering.models import AttributionRule, Gpu, Node
from tests.loans.services.test_bursts import act, ask
from tests.metering.intake.test_ingest_api import post, sample
from tests.tiers import examples

H100 = "NVIDIA H100 80GB HBM3"
L40S = "NVIDIA L40S"


def gpus(node: Node, model: str, count: int, *, seen=None, prefix: str = "GPU", share=1.0):
    seen = timezone.now() if seen is None else seen
    Gpu.objects.bulk_create(
        Gpu(uuid=f"{prefix}-{node.name}-{i}", node=node, index=i, model=model, share=share,
            last_seen_at=seen) for i in range(count))


def signed(tenant, plan: Plan) -> Contract:
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1),
                        time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


def plan_of(model: str, base: int, cap: int) -> Plan:
    return Plan.objects.create(
        name=f"{model or 'any'} {base}-{cap}", gpu_model=model, base_quota_gpus=base,
        max_quota_gpus=cap, committed_gpu_hours=100, committed_rate=10, term_months=12)


@pytest.fixture
def h100_pool(contract, other_tenant, plan):
    """20 H100s seen now; vision's and speech's H100 contracts guarantee 8 each: 4 left."""
    gpus(Node.objects.create(name="h100"), H100, 20)
    return signed(other_tenant, plan)


def test_made_up_devices_past_a_nodes_limit_do_not_free_a_queued_burst(client, tenant, lead):
    node = Node.objects.create(name="gpu-node-01", max_devices=4)
    token = node.issue_token()
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision")
    contract = signed(tenant, plan_of(L40S, 4, 8))
    real = [sample(g, 0, model=L40S) for g in range(4)]
    assert post(client, token, real).json()["accepted"] == 4
    waiting = ask(client, lead, contract, 2).json()
    assert waiting["state"] == "queued"  # the 4 L40S are all guaranteed to the base quota

    made_up = [sample(g, 1, model=L40S, gpu_uuid=f"GPU-fake-{g}") for g in range(4)]
    answer = post(client, token, made_up).json()
    assert answer["accepted"] == 0 and len(answer["rejected"]) == 4
    assert bursts.process_queue(timezone.now()).granted == 0
    assert BurstRequest.objects.get(pk=waiting["id"]).state == "queued"
    assert bursts.physical_gpus(timezone.now()) == {L40S: 4.0}


def test_gpus_unseen_for_the_capacity_window_are_not_capacity(client, lead, contract, plan,
                                                             settings):
    node = Node.objects.create(name="h100")
    stale = timezone.now() - timedelta(hours=settings.CAPACITY_WINDOW_HOURS, minutes=1)
    gpus(node, H100, 20, seen=stale)  # replaced months ago, never reported since
    assert bursts.physical_gpus(timezone.now()) == {}
    assert ask(client, lead, contract, 2).json()["state"] == "queued"

    Gpu.objects.filter(index__lt=12).update(last_seen_at=timezone.now())
    assert bursts.physical_gpus(timezone.now()) == {H100: 12.0}
    assert bursts.process_queue(timezone.now()).granted == 1  # 12 - 8 base: room for 2


def test_a_mig_instance_counts_as_its_fraction_of_a_gpu(client, lead, tenant):
    a100 = "NVIDIA A100-SXM4-80GB"
    node = Node.objects.create(name="a100")
    gpus(node, a100, 14, prefix="MIG", share=1 / 7)  # two GPUs cut into seven each
    assert bursts.physical_gpus(timezone.now()) == {a100: 2.0}
    contract = signed(tenant, plan_of(a100, 0, 8))
    assert ask(client, lead, contract, 3).json()["state"] == "queued"
    assert ask(client, lead, contract, 2).json()["state"] == "queued"  # behind the first
    BurstRequest.objects.filter(gpus=3).update(state="cancelled")
    assert bursts.process_queue(timezone.now()).granted == 1


def test_a_plan_of_any_model_never_takes_room_guaranteed_to_others(
        client, lead, outsider, contract, other_tenant):
    gpus(Node.objects.create(name="h100"), H100, 20)
    gpus(Node.objects.create(name="l40s"), L40S, 3)
    # speech's plan is for any model: its 8 base GPUs may come from either pool.
    anything = signed(other_tenant, plan_of("", 8, 16))
    # H100: 20 - 8 (vision's base) = 12 free; L40S: 3; the fleet: 23 - 16 guaranteed = 7.
    first = ask(client, outsider, anything, 6).json()
    assert (first["state"], BurstRequest.objects.get(pk=first["id"]).pool) == ("granted", H100)
    # One GPU is not guaranteed to anyone: two more would take a base quota's GPUs.
    assert ask(client, outsider, anything, 2).json()["state"] == "queued"
    # vision bursts on its own pool: 20 - 8 - 6 = 6 on H100, but one in the fleet.
    assert ask(client, lead, contract, 1).json()["state"] == "granted"
    assert ask(client, lead, contract, 1).json()["state"] == "queued"


def test_a_burst_never_outlasts_its_contract(client, lead, contract, h100_pool):
    end = contract.window_end
    client.force_login(lead)
    response = client.post("/api/v1/bursts/", {
        "contract": contract.pk, "gpus": 1, "starts_at": (end - timedelta(hours=2)).isoformat(),
        "ends_at": (end + timedelta(hours=6)).isoformat(), "reason": "past the end"},
        content_type="application/json")
    assert response.status_code == 400
    assert "lies inside its contract" in str(response.json())


def test_a_termination_shortens_or_withdraws_the_bursts_past_the_new_end(
        client, lead, operator, contract, h100_pool):
    now = timezone.now()
    period = contract.period_at(now)
    running = bursts.submit(contract=contract, user=lead, gpus=2,
                            starts_at=period.end - timedelta(days=2),
                            ends_at=period.end + timedelta(days=3), reason="r", now=now)
    later = bursts.submit(contract=contract, user=lead, gpus=1,
                          starts_at=period.end + timedelta(days=1),
                          ends_at=period.end + timedelta(days=2), reason="r", now=now)
    assert (running.state, later.state) == ("granted", "granted")
    terminate(contract=contract, reason="moving on", now=now)
    running.refresh_from_db()
    later.refresh_from_db()
    assert (running.state, running.ends_at) == ("granted", period.end)
    assert later.state == "revoked"
    assert not BurstRequest.objects.filter(ends_at__gt=period.end, state="granted").exists()


def test_priority_means_lower_first_for_bursts_as_for_attribution_rules(
        client, lead, outsider, operator, contract, h100_pool):
    ask(client, lead, contract, 3)  # granted: one GPU left
    big = ask(client, outsider, h100_pool, 2).json()
    small = ask(client, lead, contract, 1).json()
    act(client, operator, big["id"], "prioritise", priority=200)  # behind the default, 100
    assert bursts.process_queue(timezone.now()).granted == 1
    assert BurstRequest.objects.get(pk=small["id"]).state == "granted"
    assert BurstRequest.objects.get(pk=big["id"]).state == "queued"
    client.force_login(outsider)
    assert "(priority 200)" in client.get("/en/tenants/speech/").content.decode()
    waiting = ask(client, outsider, h100_pool, 1).json()  # the default priority says nothing
    assert waiting["state"] == "queued" and waiting["priority"] == 100
    assert client.get("/en/tenants/speech/").content.decode().count("(priority ") == 1


def test_the_manifest_names_the_namespace_attribution_tries_first(tenant, contract):
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision-old",
                                   priority=50)
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision",
                                   priority=10)
    assert manifests.namespace_of(tenant) == "vision"
    quota, queue = yaml.safe_load_all(manifests.tenant_manifests(tenant, timezone.now()))
    assert quota["metadata"]["namespace"] == "vision"
    assert queue["spec"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "vision"}


HOUR = timedelta(hours=1)
T0 = datetime(2026, 3, 1, tzinfo=UTC)
guarantee_sets = st.lists(st.tuples(st.integers(0, 60 * 48), st.integers(1, 60 * 24),
                                    st.integers(0, 8)), max_size=12)


@settings(max_examples=examples(300), deadline=None)
@given(owed=guarantee_sets, first_hour=st.integers(0, 40), count=st.integers(0, 30))
def test_a_pool_s_hourly_guarantees_are_the_most_held_at_any_moment_of_each_hour(
        owed, first_hour, count):
    """The pool chart's sweep against a model that tries every moment that matters: each
    hour's start and every guarantee's edge inside it."""
    spans = [(T0 + timedelta(minutes=start), T0 + timedelta(minutes=start + length), base)
             for start, length, base in owed]
    hours = [T0 + (first_hour + k) * HOUR for k in range(count)]

    def held(moment):
        return sum(base for first, last, base in spans if first <= moment < last)

    want = [max(held(m) for m in [hour] + [edge for first, last, _b in spans
                                           for edge in (first, last) if hour < edge < hour + HOUR])
            for hour in hours]
    assert capacity.guaranteed_by_hour(spans, hours) == want
    assert want == [capacity.guaranteed_gpus(spans, hour, hour + HOUR) for hour in hours]
