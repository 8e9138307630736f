"""The meter's invariants over random streams, posted through the HTTP endpoint as agents post
them: several nodes in two clusters, overlapping samples, agents restarted with another
interval, devices moving between nodes, resent batches, hostile owners (another cluster's
namespace) and made-up devices past a node's limit. Checked against a model written here:

- the usage API equals the model's accepted samples, split by hour (the first stored sample
  wins; a later one that overlaps it is rejected; a resent one is a duplicate);
- no device is counted for more than 3600 s in an hour;
- no token changes any tenant's usage outside its node's cluster, nor counts more than its
  node's device limit times the wall clock;
- the rollups equal a recount of the raw samples.
"""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import transaction
from django.test import Client, override_settings
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loans.models import Tenant
from metering import partitions
from metering.intake.ingest import forget_gpus
from metering.models import AttributionRule, Cluster, GpuHour, GpuTenure, Node, UsageSample
from metering.rollups import parts
from tests.helpers import assert_rollups_equal_a_recount
from tests.tiers import examples

T0 = datetime(2026, 11, 28, tzinfo=UTC)
HOUR = timedelta(hours=1)
MOVE = timedelta(minutes=10)
NODES = {"prod-1": ("prod", 2), "prod-2": ("prod", 2), "lab-1": ("lab", 2), "lab-2": ("lab", 3)}
NAMESPACES = ["team-a", "team-b", "sandbox", None]
# Which tenant an owner value or a node means, and where: the rules of the test's world.
RULES = {("prod", "team-a"): "alpha", ("lab", "team-b"): "beta"}
NODE_RULES = {"lab-2": "gamma"}


@dataclass
class Offered:
    device: str
    start: datetime
    interval: int
    allocated: bool
    fraction: float
    namespace: str | None

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.interval)

    def reading(self) -> tuple:
        return (self.interval, self.allocated, self.fraction, self.namespace)

    def body(self, index: int) -> dict:
        return {"gpu_uuid": self.device, "gpu_index": index, "ts": self.start.isoformat(),
                "interval_s": self.interval, "allocated": self.allocated,
                "fraction": self.fraction, "util_pct": 50.0,
                "owner": {"namespace": self.namespace} if self.namespace else None}


@dataclass
class Model:
    """What the meter should have done, worked out from first principles."""

    owner: dict[str, str] = field(default_factory=dict)  # device -> node holding it
    seen: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (node, device)
    stored: dict[str, list[tuple[datetime, datetime, tuple, str | None, str]]] = field(
        default_factory=dict)  # device -> [(start, end, reading, tenant, node)]

    def tenant(self, node: str, namespace: str | None) -> str | None:
        cluster = NODES[node][0]
        if namespace and (cluster, namespace) in RULES:
            return RULES[(cluster, namespace)]
        return NODE_RULES.get(node)

    def register(self, node: str, devices: list[str], now: datetime) -> set[str]:
        """The batch's devices this node may report (moving and registering, within its
        limit), in the order the server registers them: new devices first, then moves."""
        limit = NODES[node][1]
        mine = {d for d, n in self.owner.items() if n == node}
        new = [d for d in devices if d not in self.owner]
        moving = sorted((d for d in devices if self.owner.get(d) not in (None, node)
                         and now - self.seen.get((self.owner[d], d), now - MOVE) >= MOVE),
                        key=lambda d: (self.owner[d], int(d.split("-")[1]), d))
        for device in new + moving:
            if len(mine) < limit:
                mine.add(device)
                self.owner[device] = node
        for device in devices:
            if self.owner.get(device) == node:
                self.seen[(node, device)] = now
        return {d for d in devices if self.owner.get(d) == node}

    def post(self, node: str, samples: list[Offered], now: datetime) -> None:
        allowed = self.register(node, list(dict.fromkeys(s.device for s in samples)), now)
        first: dict[tuple[str, datetime], Offered] = {}
        for sample in samples:  # a repeat inside the batch: a duplicate or a conflict
            first.setdefault((sample.device, sample.start), sample)
        # Within a batch, samples of one device are decided in time order.
        for sample in sorted(first.values(), key=lambda s: (s.device, s.start)):
            if sample.device not in allowed:
                continue
            held = self.stored.setdefault(sample.device, [])
            if any(start == sample.start for start, *_rest in held):
                continue  # a duplicate or a conflict: nothing new
            if any(start < sample.end and sample.start < end for start, end, *_r in held):
                continue  # an overlap: the first stored wins
            held.append((sample.start, sample.end, sample.reading(),
                         self.tenant(node, sample.namespace), node))

    def usage(self) -> dict[tuple[str | None, datetime], float]:
        """Allocated GPU-seconds by tenant and hour, each sample split over its hours."""
        out: dict = {}
        for held in self.stored.values():
            for start, end, (_i, allocated, fraction, _ns), tenant, _node in held:
                hour = start.replace(minute=0, second=0, microsecond=0)
                while allocated and hour < end:
                    seconds = (min(end, hour + HOUR) - max(start, hour)).total_seconds()
                    out[(tenant, hour)] = out.get((tenant, hour), 0.0) + seconds * fraction
                    hour += HOUR
        return out


devices = st.sampled_from([f"GPU-{k}" for k in range(6)] + [f"FAKE-{k}" for k in range(6, 9)])
sample_strategy = st.builds(
    lambda device, back, interval, allocated, fraction, namespace: (
        device, back, interval, allocated, fraction, namespace),
    devices, st.sampled_from(range(0, 120 * 60, 90)), st.sampled_from([30, 60, 300, 3600]),
    st.booleans(), st.sampled_from([1.0, 0.5]), st.sampled_from(NAMESPACES))
batch_strategy = st.tuples(
    st.sampled_from(sorted(NODES)), st.sampled_from(range(0, 25, 3)),  # minutes later
    st.lists(sample_strategy, min_size=1, max_size=8), st.booleans())  # resend an earlier one


def world() -> tuple[dict[str, Node], dict[str, str]]:
    clusters = {name: Cluster.objects.create(name=name) for name in ("prod", "lab")}
    tenants = {slug: Tenant.objects.create(slug=slug, name=slug)
               for slug in ("alpha", "beta", "gamma")}
    for (cluster, namespace), slug in RULES.items():
        AttributionRule.objects.create(tenant=tenants[slug], cluster=clusters[cluster],
                                       field="namespace", value=namespace)
    for node, slug in NODE_RULES.items():
        AttributionRule.objects.create(tenant=tenants[slug], field="node", value=node)
    nodes = {name: Node.objects.create(name=name, cluster=clusters[cluster], max_devices=limit)
             for name, (cluster, limit) in NODES.items()}
    return nodes, {name: node.issue_token() for name, node in nodes.items()}


def post(client: Client, token: str, node: str, samples: list[Offered]) -> dict:
    body = {"node": node, "agent_version": "test",
            "samples": [s.body(int(s.device.split("-")[1])) for s in samples]}
    response = client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202, response.content
    return response.json()


def check(client: Client, model: Model, nodes: dict[str, Node]) -> None:
    want = model.usage()
    got: dict = {}
    for slug in ("alpha", "beta", "gamma"):
        answer = client.get(f"/api/v1/tenants/{slug}/usage", {
            "granularity": "hour", "start": (T0 - 3 * HOUR).isoformat(),
            "end": (T0 + 30 * HOUR).isoformat()}).json()
        for row in answer["rows"]:
            if row["allocated_gpu_hours"]:
                got[(slug, datetime.fromisoformat(row["start"]))] = row["allocated_gpu_hours"]
    expected = {k: v / 3600 for k, v in want.items() if k[0] is not None and v}
    assert set(got) == set(expected)
    for key, hours in expected.items():
        assert got[key] == pytest.approx(hours, abs=1e-6), key
    # No device counted past the wall clock in any hour.
    per_device: dict = {}
    for gpu, hour, seconds in GpuHour.objects.values_list("gpu_id", "hour", "reported_s"):
        per_device[(gpu, hour)] = per_device.get((gpu, hour), 0.0) + seconds
    assert all(seconds <= 3600 + 1e-6 for seconds in per_device.values())
    # From the stored samples and which node held each device when: no tenant of one cluster
    # got hours from another cluster's node, and no node's devices counted past its limit
    # times the wall clock.
    tenures = list(GpuTenure.objects.select_related("node__cluster").values_list(
        "gpu_id", "since", "until", "node__name", "node__cluster__name"))
    home = {"alpha": "prod", "beta": "lab"}
    per_node: dict = {}
    for gpu, ts, interval, tenant in UsageSample.objects.values_list(
            "gpu_id", "ts", "interval_s", "tenant__slug"):
        [(node, cluster)] = [(n, c) for g, since, until, n, c in tenures
                             if g == gpu and since <= ts and (until is None or ts < until)]
        assert home.get(tenant, cluster) == cluster, (tenant, node)
        for hour, seconds, _starts in parts(ts, interval):
            per_node[(node, hour)] = per_node.get((node, hour), 0.0) + seconds
    assert all(seconds <= NODES[node][1] * 3600 + 1e-6
               for (node, _hour), seconds in per_node.items())
    assert_rollups_equal_a_recount()


@pytest.mark.django_db
@settings(max_examples=examples(80), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(stream=st.lists(batch_strategy, min_size=2, max_size=14))
def test_random_streams_count_each_device_once_a_moment_within_its_node_and_cluster(
        stream, operator):
    forget_gpus()
    partitions.forget()
    client = Client()
    with override_settings(INGEST_REQUESTS_PER_MINUTE=0, RAW_RETENTION_DAYS=10), \
            transaction.atomic():
        nodes, tokens = world()
        model, now, sent = Model(), T0 + 2 * HOUR, []
        refused = {"overlap": 0, "reported by node": 0, "device limit": 0}
        for node, minutes, raw, resend in stream:
            now += timedelta(minutes=minutes, seconds=7)
            if resend and sent:
                node, samples = sent[minutes % len(sent)]
            else:
                samples = [Offered(d, (now - timedelta(seconds=back)).replace(microsecond=0),
                                   interval, allocated, fraction, namespace)
                           for d, back, interval, allocated, fraction, namespace in raw]
                samples = [s for s in samples if s.end <= now + timedelta(minutes=5)]
                if not samples:
                    continue
                sent.append((node, samples))
            forget_gpus()  # each batch as a fresh worker process sees it: no cached devices
            with time_machine.travel(now, tick=False):
                answer = post(client, tokens[node], node, samples)
            model.post(node, samples, now)
            for rejection in answer["rejected"]:
                for reason in refused:
                    refused[reason] += rejection["error"].startswith(reason)
        for reason, count in refused.items():
            event(f"{reason} refusals: {min(count, 3)}+")
        client.force_login(operator)
        with time_machine.travel(now, tick=False):
            check(client, model, nodes)
        transaction.set_rollback(True)
    forget_gpus()
    partitions.forget()
