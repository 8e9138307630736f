"""The meter's invariants over random streams, posted through the HTTP endpoint as agents post
them: whole GPUs, MIG instances (naming their parent or only their index) and time-sliced
replicas, from several nodes in two clusters, with hostile fractions, back-dated and made-up
devices, agents restarted with another interval, devices moving between nodes and resent
batches, a node registered mid-stream whose agent sends back-dated batches, samples past the
back-fill horizon, parent cycles and chains, and parents named across clusters. Checked
against a model written here of what the meter should decide, and against brute-force counts
of what it stored:

- the usage API equals the model's accepted samples, split by hour;
- per physical GPU and instant, the fractions of its stored samples sum to at most one GPU,
  and no device's samples overlap;
- per node and hour, at most its max_devices physical GPUs reported, counted from which node
  held each device when;
- nothing from before a node's registration or past the back-fill horizon;
- no physical GPU is a part of another (no chain, no cycle);
- no tenant of one cluster got hours from another cluster's node;
- capacity counts each physical GPU once;
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
from metering.models import AttributionRule, Cluster, Gpu, GpuTenure, Node, UsageSample
from metering.rollups import parts
from metering.usage import fleet
from tests.helpers import assert_rollups_equal_a_recount
from tests.tiers import examples

T0 = datetime(2026, 11, 28, tzinfo=UTC)
HOUR = timedelta(hours=1)
MOVE = timedelta(minutes=10)
WINDOW = timedelta(hours=24)  # CAPACITY_WINDOW_HOURS
SINCE_EVER = datetime(2000, 1, 1, tzinfo=UTC)
TOLERANCE = 1e-9
NODES = {"prod-1": ("prod", 2), "prod-2": ("prod", 2), "lab-1": ("lab", 2),
         "late-1": ("prod", 2)}
LATE = "late-1"  # registered at its first batch of the stream, which may be back-dated
HORIZON = timedelta(days=1)  # BACKFILL_HORIZON_DAYS in these streams
NAMESPACES = ["team-a", "team-b", None]
RULES = {("prod", "team-a"): "alpha", ("lab", "team-b"): "beta"}
NODE_RULES = {"lab-1": "gamma"}
MODEL = "NVIDIA H100 80GB HBM3"
# Devices: whole GPUs, replicas of GPU-0 and GPU-1, MIG instances of GPU-1 and GPU-2 (one of
# each names its parent, the other only its index), made-up GPUs, and devices naming a parent
# in a cycle (GPU-5 <-> GPU-6) and a chain (GPU-8 -> GPU-7 -> GPU-3).
DEVICES = (["GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-0::0", "GPU-0::1", "GPU-1::0",
            "MIG-1-a", "MIG-1-b", "MIG-2-a", "MIG-2-b", "FAKE-10", "FAKE-11",
            "GPU-5", "GPU-6", "GPU-7", "GPU-8"])
PARENTS = {"GPU-5": "GPU-6", "GPU-6": "GPU-5", "GPU-7": "GPU-3", "GPU-8": "GPU-7"}


def index_of(device: str) -> int:
    return int(device.split("-")[1].split(":")[0])


def parent_named(device: str) -> str | None:
    return f"GPU-{index_of(device)}" if device.endswith("-a") else PARENTS.get(device)


def is_part(device: str) -> bool:
    return device.startswith("MIG-") or "::" in device


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

    def body(self) -> dict:
        body = {"gpu_uuid": self.device, "gpu_index": index_of(self.device), "model": MODEL,
                "ts": self.start.isoformat(), "interval_s": self.interval,
                "allocated": self.allocated, "fraction": self.fraction, "util_pct": 50.0,
                "owner": {"namespace": self.namespace} if self.namespace else None}
        if parent_named(self.device):
            body["parent_uuid"] = parent_named(self.device)
        return body

    def hours(self) -> list[datetime]:
        return [hour for hour, _seconds, _starts in parts(self.start, self.interval)]


@dataclass
class Device:
    """A registered device (or physical GPU row) as the model sees it."""

    id: int
    node: str
    key: str  # its physical GPU's uuid
    last_seen: datetime | None
    share: float
    tenures: list[list] = field(default_factory=list)  # [node, since, until or None]
    covered_until: datetime | None = None


@dataclass
class Stored:
    device: str
    start: datetime
    end: datetime
    reading: tuple
    tenant: str | None


@dataclass
class Model:
    """What the meter should decide, from the rules in DESIGN.md ("The meter", "Trust")."""

    devices: dict[str, Device] = field(default_factory=dict)
    stored: list[Stored] = field(default_factory=list)
    next_id: int = 1
    registered: dict[str, datetime] = field(default_factory=dict)  # LATE's, once registered

    def tenant(self, node: str, namespace: str | None) -> str | None:
        cluster = NODES[node][0]
        if namespace and (cluster, namespace) in RULES:
            return RULES[(cluster, namespace)]
        return NODE_RULES.get(node)

    def family(self, key: str) -> list[str]:
        return [uuid for uuid, d in self.devices.items() if d.key == key or uuid == key]

    def quiet(self, key: str, node: str, now: datetime) -> bool:
        members = [self.devices[u] for u in self.family(key)]
        held = self.devices.get(key, members[0] if members else None)
        if held is None or NODES[held.node][0] != NODES[node][0]:
            return False
        seen = [d.last_seen for d in members if d.last_seen is not None]
        return not seen or now - max(seen) >= MOVE

    def key_of(self, device: str, node: str, wholes: dict[int, str]) -> str:
        if parent_named(device):
            return parent_named(device)
        if "::" in device:
            return device.split("::")[0]
        if device.startswith("MIG-"):
            return wholes.get(index_of(device), f"index:{index_of(device)}@{node}")
        return device

    def present(self, node: str, hour: datetime) -> set[str]:
        """The physical GPUs with a stored sample in the hour from when the node held them."""
        out = set()
        for s in self.stored:
            d = self.devices[s.device]
            if s.start < hour + HOUR and s.end > hour and any(
                    n == node and since <= s.start and (until is None or s.start < until)
                    for n, since, until in d.tenures):
                out.add(d.key)
        return out

    def spooled(self, device: str, node: str, sample: Offered) -> bool:
        return any(n == node and until is not None and since <= sample.start
                   and sample.end <= until for n, since, until in self.devices[device].tenures)

    def add(self, uuid: str, node: str, key: str, now: datetime | None, share: float) -> None:
        self.devices[uuid] = Device(self.next_id, node, key, now, share,
                                    [[node, SINCE_EVER, None]])
        self.next_id += 1

    def post(self, node: str, samples: list[Offered], now: datetime) -> None:
        # Refused at the door: before the node's registration, or past the back-fill horizon.
        oldest = max(now - HORIZON, self.registered.get(node, SINCE_EVER))
        samples = [s for s in samples if s.start >= oldest]
        first: dict[tuple[str, datetime], Offered] = {}
        for sample in samples:  # a repeat inside the batch: a duplicate or a conflict
            first.setdefault((sample.device, sample.start), sample)
        batch = list(first.values())
        order = list(dict.fromkeys(s.device for s in batch))  # first appearance
        known_before = set(self.devices)
        for uuid in order:  # this node's own devices are seen
            if uuid in self.devices and self.devices[uuid].node == node:
                self.devices[uuid].last_seen = now
        # The node's registered whole GPUs by index (a MIG instance naming no parent is the
        # first one's at its index).
        wholes = {index_of(u): u for u in sorted(self.devices, reverse=True)
                  if self.devices[u].node == node and not is_part(u) and self.devices[u].key == u
                  and not u.startswith("index:")}
        for uuid in order:  # ... else a GPU new in this batch at its index, the first one
            if uuid not in self.devices and not is_part(uuid) and not parent_named(uuid):
                wholes.setdefault(index_of(uuid), uuid)
        keys_of = {uuid: self.key_of(uuid, node, wholes) for uuid in order
                   if uuid not in self.devices}
        parts = {uuid for uuid, key in keys_of.items() if key != uuid}
        refused, new, moving = set(), {}, set()
        for uuid in order:
            known = self.devices.get(uuid)
            if known is None:
                key = keys_of[uuid]
                parent = self.devices.get(key) if key != uuid else None
                if key in parts or (parent is not None and parent.key != key):
                    refused.add(uuid)  # a part is not a GPU, in any batch order
                    continue
                if parent is not None and parent.node != node:
                    if not self.quiet(key, node, now):
                        refused.add(uuid)
                        continue
                    moving.add(key)
                new[uuid] = key
            elif known.node != node and self.quiet(known.key, node, now):
                moving.add(known.key)
        keys = {}
        for k, sample in enumerate(batch):
            uuid, known = sample.device, self.devices.get(sample.device)
            if uuid in refused:
                continue
            if known is None:
                keys[k] = new[uuid]
            elif known.node == node or known.key in moving or self.spooled(uuid, node, sample):
                keys[k] = known.key
        # The device limit, in batch order: a GPU new to the node against those it saw
        # within the capacity window, then every GPU in every hour its samples cover.
        limit = NODES[node][1]
        active = {d.key for d in self.devices.values() if d.node == node
                  and d.last_seen is not None and now - d.last_seen <= WINDOW}
        arriving = {key for k, key in keys.items() if key in moving or (
            batch[k].device in new and not (key in self.devices
                                            and self.devices[key].node == node))}
        for k in sorted(keys):
            if keys[k] in arriving:
                if keys[k] in active or len(active) < limit:
                    active.add(keys[k])
                else:
                    del keys[k]
        hours = {h for k in keys for h in batch[k].hours()}
        present = {h: self.present(node, h) for h in hours}
        for k in sorted(keys):
            key, covered = keys[k], batch[k].hours()
            if all(key in present[h] or len(present[h]) < limit for h in covered):
                for h in covered:
                    present[h].add(key)
            else:
                del keys[k]
        # Moves, then registration: physical rows first, then devices in order of appearance.
        for key in sorted(k for k in moving if k in keys.values()):
            first = min(batch[k].start for k in keys if keys[k] == key)
            for uuid in self.family(key):
                d = self.devices[uuid]
                if d.node != node:
                    boundary = max(d.covered_until or SINCE_EVER, first)
                    d.tenures[-1][2] = boundary
                    d.tenures.append([node, boundary, None])
                    d.node, d.last_seen = node, now
        used = {batch[k].device for k in keys}
        wanted = [u for u in new if u in used]
        for key in sorted({new[u] for u in wanted if new[u] != u and new[u] not in self.devices}
                          - set(wanted)):
            self.add(key, node, key, None, 1.0)
        for uuid in wanted:
            last = [s for s in batch if s.device == uuid][-1]
            self.add(uuid, node, new[uuid], now, min(1.0, last.fraction) if is_part(uuid)
                     else 1.0)
        # The samples, in time order then device id: each device once a moment, each physical
        # GPU at most whole at every moment.
        # A device's holder reports it only from when it took it; the node that held it before
        # keeps the hours before (and may still send those it spooled).
        accepted = sorted((k for k in keys if batch[k].device in self.devices and (
            self.devices[batch[k].device].node != node
            or batch[k].start >= self.devices[batch[k].device].tenures[-1][1])),
            key=lambda k: (batch[k].start, self.devices[batch[k].device].id))
        for k in accepted:
            sample = batch[k]
            device = self.devices[sample.device]
            mine = [s for s in self.stored if s.device == sample.device]
            if any(s.start == sample.start for s in mine):
                continue  # a duplicate or a conflict
            if any(s.start < sample.end and sample.start < s.end for s in mine):
                continue  # an overlap
            family = [s for s in self.stored if self.devices[s.device].key == device.key]
            shared = device.key != sample.device or any(
                d.key == sample.device and u != sample.device for u, d in self.devices.items())
            if shared:
                moments = [sample.start] + [s.start for s in family
                                            if sample.start < s.start < sample.end]
                if any(sum(s.reading[2] for s in family if s.start <= m < s.end)
                       + sample.fraction > 1 + TOLERANCE for m in moments):
                    continue
            self.stored.append(Stored(sample.device, sample.start, sample.end,
                                      sample.reading(), self.tenant(node, sample.namespace)))
            device.covered_until = max(device.covered_until or sample.end, sample.end)
        assert known_before <= set(self.devices)

    def usage(self) -> dict[tuple[str | None, datetime], float]:
        out: dict = {}
        for s in self.stored:
            _interval, allocated, fraction, _ns = s.reading
            hour = s.start.replace(minute=0, second=0, microsecond=0)
            while allocated and hour < s.end:
                seconds = (min(s.end, hour + HOUR) - max(s.start, hour)).total_seconds()
                out[(s.tenant, hour)] = out.get((s.tenant, hour), 0.0) + seconds * fraction
                hour += HOUR
        return out


sample_strategy = st.tuples(
    st.sampled_from(DEVICES),
    # Few distinct starts, so that parts of one GPU often meet at one moment.
    st.one_of(st.sampled_from(range(0, 120 * 60, 600)),  # recent
              st.sampled_from(range(3600 * 20, 3600 * 30, 1800))),  # back-dated
    st.sampled_from([30, 60, 300, 3600]), st.booleans(),
    st.sampled_from([1.0, 0.75, 0.5, 0.25, 1 / 3]), st.sampled_from(NAMESPACES))
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
    nodes = {name: Node.objects.create(name=name, cluster=clusters[cluster], max_devices=limit,
                                       created_at=SINCE_EVER)
             for name, (cluster, limit) in NODES.items()}
    return nodes, {name: node.issue_token() for name, node in nodes.items()}


def post(client: Client, token: str, node: str, samples: list[Offered]) -> dict:
    body = {"node": node, "agent_version": "test", "samples": [s.body() for s in samples]}
    response = client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202, response.content
    return response.json()


def check(client: Client, model: Model, now: datetime) -> None:
    want = model.usage()
    got: dict = {}
    for slug in ("alpha", "beta", "gamma"):
        answer = client.get(f"/api/v1/tenants/{slug}/usage", {
            "granularity": "hour", "start": (T0 - 40 * HOUR).isoformat(),
            "end": (T0 + 30 * HOUR).isoformat()}).json()
        for row in answer["rows"]:
            if row["allocated_gpu_hours"]:
                got[(slug, datetime.fromisoformat(row["start"]))] = row["allocated_gpu_hours"]
    expected = {k: v / 3600 for k, v in want.items() if k[0] is not None and v}
    assert set(got) == set(expected)
    for key, hours in expected.items():
        assert got[key] == pytest.approx(hours, abs=1e-6), key

    # Brute force over what was stored, with which node held each device when.
    physical = {pk: physical or pk for pk, physical in Gpu.objects.values_list("pk",
                                                                             "physical_id")}
    assert all(physical[p] == p for p in physical.values())  # no chain, no cycle
    tenures = list(GpuTenure.objects.values_list("gpu_id", "since", "until", "node__name",
                                                 "node__cluster__name"))
    rows = list(UsageSample.objects.values_list("gpu_id", "ts", "interval_s", "fraction",
                                                "tenant__slug"))
    registered = dict(Node.objects.values_list("name", "created_at"))
    home = {"alpha": "prod", "beta": "lab"}
    by_node_hour: dict = {}
    for gpu, ts, interval, _fraction, tenant in rows:
        [(node, cluster)] = [(n, c) for g, since, until, n, c in tenures
                             if g == gpu and since <= ts and (until is None or ts < until)]
        assert home.get(tenant, cluster) == cluster, (tenant, node)
        assert ts >= registered[node], (node, ts)
        for hour, _seconds, _starts in parts(ts, interval):
            by_node_hour.setdefault((node, hour), set()).add(physical[gpu])
    for (node, _hour), gpus in by_node_hour.items():
        assert len(gpus) <= NODES[node][1], (node, gpus)
    for gpu, ts, interval, _fraction, _tenant in rows:
        end = ts + timedelta(seconds=interval)
        same = [(t, i) for g, t, i, _f, _n in rows if g == gpu and (t, i) != (ts, interval)]
        assert not any(t < end and ts < t + timedelta(seconds=i) for t, i in same), gpu
        held = sum(f for g, t, i, f, _n in rows if physical[g] == physical[gpu]
                   and t <= ts < t + timedelta(seconds=i))
        assert held <= 1 + TOLERANCE, (gpu, ts, held)
    # Capacity: every physical GPU once, as the shares of its devices seen in the window.
    since = now - timedelta(days=1)
    shares: dict = {}
    for pk, seen, share in Gpu.objects.values_list("pk", "last_seen_at", "share"):
        if seen is not None and seen >= since:
            shares[physical[pk]] = shares.get(physical[pk], 0.0) + share
    pool = sum(min(1.0, s) for s in shares.values())
    assert fleet.gpus_by_model(since).get(MODEL, 0.0) == pytest.approx(pool, abs=1e-6)
    assert_rollups_equal_a_recount()


@pytest.mark.django_db
@settings(max_examples=examples(80), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(stream=st.lists(batch_strategy, min_size=2, max_size=14))
def test_random_streams_count_each_physical_gpu_once_a_moment_within_its_node_and_cluster(
        stream, operator):
    forget_gpus()
    partitions.forget()
    client = Client()
    with override_settings(INGEST_REQUESTS_PER_MINUTE=0, RAW_RETENTION_DAYS=10,
                           BACKFILL_HORIZON_DAYS=HORIZON.days), transaction.atomic():
        _nodes, tokens = world()
        model, now, sent = Model(), T0 + 2 * HOUR, []
        refused = {"overlap": 0, "reported by node": 0, "device limit": 0, "parent": 0,
                   "before this node held it": 0, "past one GPU": 0, "was registered": 0,
                   "back-fill horizon": 0, "is a part of a GPU": 0}
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
            if node == LATE and LATE not in model.registered:  # registered just now
                Node.objects.filter(name=LATE).update(created_at=now)
                model.registered[LATE] = now
            forget_gpus()  # each batch as a fresh worker process sees it: no cached devices
            with time_machine.travel(now, tick=False):
                answer = post(client, tokens[node], node, samples)
            model.post(node, samples, now)
            for rejection in answer["rejected"]:
                for reason in refused:
                    refused[reason] += reason in rejection["error"]
        for reason, count in refused.items():
            event(f"{reason} refusals: {min(count, 3)}+")
        client.force_login(operator)
        with time_machine.travel(now, tick=False):
            check(client, model, now)
        transaction.set_rollback(True)
    forget_gpus()
    partitions.forget()
