"""Storing a batch of samples: validated, devices registered (within the node's limit, never
another node's), usage attributed within the node's cluster, owners to their ids, then written
with no device counted twice for one moment and rollups kept exact
(metering.intake.store_postgresql, metering.intake.store_sqlite)."""

import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, Value, When

from metering import owners
from metering.attribution import Attributor, Rule
from metering.intake import protocol, store_postgresql, store_sqlite, wire
from metering.intake.protocol import each_object_once
from metering.models import (
    TENURE_START,
    AttributionRule,
    DeviceRefusal,
    Gpu,
    GpuTenure,
    Node,
    hash_token,
    parent_of,
    share_of,
)

GPU_CACHE_SECONDS = 60


@dataclass
class Result:
    accepted: int
    duplicates: int
    rejected: list[dict]

    def as_dict(self) -> dict:
        return {"accepted": self.accepted, "duplicates": self.duplicates,
                "rejected": self.rejected}


def ingest(node: Node, envelope: protocol.Envelope, *, now: datetime) -> Result:
    oldest = now - timedelta(days=settings.RAW_RETENTION_DAYS)
    batch, rejected, repeats = wire.samples(envelope, now, oldest)
    # Each GPU's (index, model, memory) as its last sample in the batch reports them.
    latest = dict(zip(batch.gpu_uuid, zip(batch.gpu_index, batch.model, batch.mem_total_mib,
                                          strict=True), strict=True))
    gpu_ids, refused = register_gpus(
        node, latest, now, fractions=lambda: dict(zip(batch.gpu_uuid, batch.fraction,
                                                      strict=True)))
    ids = list(map(gpu_ids.get, batch.gpu_uuid))
    if refused:  # another node's devices, or devices past the node's limit: no id
        keep = [k for k, gpu_id in enumerate(ids) if gpu_id is not None]
        rejected.extend({"index": batch.index[k], "error": refused[batch.gpu_uuid[k]][1]}
                        for k, gpu_id in enumerate(ids) if gpu_id is None)
        _record_refusals(node, refused, [u for u, g in zip(batch.gpu_uuid, ids, strict=True)
                                         if g is None], now)
        batch, ids = batch.keep(keep), [ids[k] for k in keep]
    columns = [batch.index, ids, batch.ts, _tenants(batch.owner, node),
               owners.ids_of(batch.owner), batch.interval_s, batch.allocated, batch.fraction,
               batch.util_pct, batch.mem_used_mib, batch.power_w, batch.temp_c,
               batch.holder_unknown]  # store.COLUMNS
    if ids:
        store = store_postgresql if connection.vendor == "postgresql" else store_sqlite
        inserted, refusals = store.write(columns, list(batch.gpu_uuid),
                                         finish=lambda: _seen(node, envelope, now))
    else:
        inserted, refusals = 0, []
        _seen(node, envelope, now)
    rejected.extend(refusals)
    rejected.sort(key=lambda item: item["index"])
    return Result(inserted, repeats + len(ids) - inserted - len(refusals), rejected)


def _record_refusals(node: Node, refused: dict[str, tuple], uuids: list[str],
                     now: datetime) -> None:
    """Keep each refused device's count and times for the alert job (a rare path: one
    upsert per refused device and batch)."""
    counts = Counter(uuids)
    for uuid, (reason, _message, holder_id) in refused.items():
        updated = DeviceRefusal.objects.filter(node=node, gpu_uuid=uuid, reason=reason).update(
            last_at=now, holder_id=holder_id, samples=F("samples") + counts[uuid])
        if not updated:
            DeviceRefusal.objects.get_or_create(
                node=node, gpu_uuid=uuid, reason=reason,
                defaults={"first_at": now, "last_at": now, "holder_id": holder_id,
                          "samples": counts[uuid]})


def _tenants(owners: list, node: Node) -> list[int | None]:
    """The tenant of each sample; equal owners (one shared dict) are attributed once."""
    attributor = _attributor()
    return each_object_once(
        lambda owner: attributor.tenant_for(owner, node.name, node.cluster_id,
                                            node.default_tenant_id), owners)


RULES_SECONDS = 5
_rules: list = [None, 0.0]  # the attributor and when it was built


def _attributor() -> Attributor:
    """The rules as of at most RULES_SECONDS ago: one query per few seconds, not per batch.
    A rule saved in this process applies at once (forget_rules); elsewhere within seconds."""
    attributor, built = _rules
    if attributor is None or time.monotonic() - built > RULES_SECONDS:
        attributor = Attributor(
            Rule(*row) for row in AttributionRule.objects.values_list(
                "tenant_id", "field", "value", "priority", "cluster_id")
        )
        _rules[:] = [attributor, time.monotonic()]
    return attributor


def forget_rules(**_signal) -> None:
    _rules[:] = [None, 0.0]


NODE_CACHE_SECONDS = 5
_nodes: dict[str, tuple[Node, float]] = {}  # token digest -> (node, cached at)


def node_for_token(token: str) -> Node | None:
    """The node holding this token (Node.objects.by_token), remembered for NODE_CACHE_SECONDS:
    the lookup was a query per batch. A node saved or deleted in this process is forgotten at
    once (forget_nodes, on signals), so a token revoked here is refused by the next request;
    other worker processes refuse it within NODE_CACHE_SECONDS. Unknown tokens are not
    remembered, so a new token works at once and guessing cannot fill the memory."""
    digest = hash_token(token)
    cached = _nodes.get(digest)
    clock = time.monotonic()
    if cached is not None and clock - cached[1] < NODE_CACHE_SECONDS:
        return cached[0]
    node = Node.objects.by_token(token)
    if node is None:
        _nodes.pop(digest, None)
    else:
        _nodes[digest] = (node, clock)
    return node


def forget_nodes(**_signal) -> None:
    _nodes.clear()


SEEN_EVERY = 10  # seconds: how stale "last seen" may be; the UPDATE is skipped in between
_last_seen: dict[int, float] = {}


def _seen(node: Node, envelope: protocol.Envelope, now: datetime) -> None:
    """Last seen, agent version and dropped samples, once the batch is stored (last in its
    transaction where it has one, metering.intake.store_postgresql), holding the node's row only at
    the very end. Skipped while nothing changed and the stored time is less than SEEN_EVERY
    seconds old. The dropped count is worked out from the stored row, not from `node` (which
    may come from a cache that another worker's update has made stale)."""
    reported = envelope.dropped_samples
    clock = time.monotonic()
    if (reported == node.dropped_samples_reported
            and envelope.agent_version == node.agent_version
            and clock - _last_seen.get(node.pk, -SEEN_EVERY) < SEEN_EVERY):
        return
    # A total below the last one means the agent restarted and counts from zero again.
    Node.objects.filter(pk=node.pk).update(
        last_seen_at=now,
        agent_version=envelope.agent_version,
        dropped_samples=F("dropped_samples") + Case(
            When(dropped_samples_reported__lte=reported,
                 then=Value(reported) - F("dropped_samples_reported")),
            default=Value(reported)),
        dropped_samples_reported=reported,
    )
    node.agent_version, node.dropped_samples_reported = envelope.agent_version, reported
    _last_seen[node.pk] = clock


# uuid -> (gpu id, node id, index, model, memory, cached at): GPUs rarely change, and most
# batches then need no GPU query at all.
_gpus: dict[str, tuple[int, int, int | None, str, int | None, float]] = {}
_node_names: dict[int, str] = {}  # node id -> name, for the reason another node's GPU is refused

Refusal = tuple[str, str, int | None]  # (DeviceRefusal reason, message for the agent, holder)


def register_gpus(node: Node, latest: dict[str, tuple], now: datetime,
                  fractions=lambda: {}) -> tuple[dict[str, int], dict[str, Refusal]]:
    """GPU ids by uuid for this node's GPUs, given each one's latest (index, model, memory),
    and the devices refused with why. New GPUs are registered (within the node's device
    limit), changed ones updated, and a GPU another node reported moves here once that node
    has not reported it for the move window. `fractions` gives each uuid's latest fraction
    (asked for only when a GPU is new)."""
    clock = time.monotonic()
    # A GPU reporting what is stored (the common case) costs one tuple comparison.
    stale = [uuid for uuid, seen in latest.items()
             if uuid not in _gpus or clock - _gpus[uuid][5] > GPU_CACHE_SECONDS
             or (_gpus[uuid][2:5] != seen and _changed(_gpus[uuid][2:5], seen))]
    refused: dict[str, Refusal] = {}
    if stale:
        refused = _refresh(node, {uuid: latest[uuid] for uuid in stale}, now, clock, fractions)
    node_id = node.pk
    ids = {}
    for uuid in latest:
        if uuid in refused:
            continue
        gpu_id, holder = _gpus[uuid][0], _gpus[uuid][1]
        if holder == node_id:
            ids[uuid] = gpu_id
        else:
            refused[uuid] = _held_elsewhere(uuid, holder)
    return ids, refused


def _held_elsewhere(uuid: str, holder: int) -> Refusal:
    minutes = settings.DEVICE_MOVE_MINUTES
    name = _node_names.get(holder, f"#{holder}")
    return (DeviceRefusal.Reason.OTHER_NODE,
            f"reported by node {name}: {uuid} moves to this node once {name} has not reported "
            f"it for {minutes} minutes", holder)


def _changed(stored: tuple, seen: tuple) -> dict[str, object]:
    """The fields to update: what the agent reports differently (it may omit any of them)."""
    return {name: new for name, old, new in zip(("index", "model", "memory_total_mib"), stored,
                                                seen, strict=True)
            if new is not None and new != old}


def _refresh(node: Node, latest: dict[str, tuple], now: datetime, clock: float,
             fractions) -> dict[str, Refusal]:
    known = {gpu.uuid: gpu for gpu in
             Gpu.objects.filter(uuid__in=list(latest)).select_related("node")}
    _node_names.update({gpu.node_id: gpu.node.name for gpu in known.values()})
    # Another node's GPU moves here once that node has been silent about it for the window.
    window = timedelta(minutes=settings.DEVICE_MOVE_MINUTES)
    moving = [gpu for gpu in known.values() if gpu.node_id != node.pk
              and (gpu.last_seen_at is None or now - gpu.last_seen_at >= window)]
    arriving = [uuid for uuid in latest if uuid not in known] + [gpu.uuid for gpu in moving]
    refused = _past_the_limit(node, arriving, latest, now)
    moving = [gpu for gpu in moving if gpu.uuid not in refused]
    new = [uuid for uuid in latest if uuid not in known and uuid not in refused]
    if new:
        share = fractions()
        created = [Gpu(uuid=uuid, node=node, index=index, model=model or "",
                       memory_total_mib=memory, first_seen_at=now, last_seen_at=now,
                       parent=parent_of(uuid, index), share=share_of(uuid, share.get(uuid)))
                   for uuid, (index, model, memory) in latest.items() if uuid in new]
        Gpu.objects.bulk_create(created, ignore_conflicts=True)
        fresh = {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=new)}
        GpuTenure.objects.bulk_create(
            GpuTenure(gpu=gpu, node_id=gpu.node_id, since=TENURE_START)
            for gpu in fresh.values() if gpu.first_seen_at == now)
        known |= fresh
    for gpu in moving:
        _move(gpu, node, now)
    seen = []
    for uuid, gpu in known.items():
        if gpu.node_id == node.pk:
            seen.append(gpu.pk)
            fields = _changed((gpu.index, gpu.model, gpu.memory_total_mib), latest[uuid])
            if fields:
                Gpu.objects.filter(pk=gpu.pk).update(**fields)
                for name, value in fields.items():
                    setattr(gpu, name, value)
        _gpus[uuid] = (gpu.pk, gpu.node_id, gpu.index, gpu.model, gpu.memory_total_mib, clock)
    _seen_gpus(seen, now)
    _node_names[node.pk] = node.name
    return refused


SEEN_GPUS = ("UPDATE metering_gpu SET last_seen_at = %s WHERE id IN "
             "(SELECT id FROM metering_gpu WHERE id = ANY(%s) ORDER BY id FOR UPDATE)")


def _seen_gpus(ids: list[int], now: datetime) -> None:
    """Last seen, for the move window and capacity. On PostgreSQL the rows are locked in id
    order, the order in which a batch's statement locks its devices: never a deadlock."""
    if not ids:
        return
    if connection.vendor != "postgresql":
        Gpu.objects.filter(pk__in=ids).update(last_seen_at=now)
        return
    with connection.cursor() as cursor:
        cursor.execute(SEEN_GPUS, [now, ids])


def _past_the_limit(node: Node, arriving: list[str], latest: dict[str, tuple],
                    now: datetime) -> dict[str, Refusal]:
    """The arriving devices (new, or moving here) that would take the node past max_devices:
    physical GPUs reported within the capacity window, a MIG instance or replica counting as
    its GPU."""
    if not arriving:
        return {}
    since = now - timedelta(hours=settings.CAPACITY_WINDOW_HOURS)
    active = set(Gpu.objects.filter(node=node, last_seen_at__gte=since)
                 .values_list("parent", flat=True))
    limit, refused = node.max_devices, {}
    for uuid in arriving:
        parent = parent_of(uuid, latest[uuid][0])
        if parent in active or len(active) < limit:
            active.add(parent)
        else:
            refused[uuid] = (DeviceRefusal.Reason.DEVICE_LIMIT,
                             f"device limit: node {node.name} may report at most {limit} GPUs "
                             f"(max_devices); {uuid} would be one more", None)
    return refused


def _move(gpu: Gpu, node: Node, now: datetime) -> None:
    """The device is this node's from the end of its last stored sample on; the node that
    reported it keeps its hours."""
    with transaction.atomic():
        boundary = Gpu.objects.values_list("covered_until", flat=True).get(pk=gpu.pk) or now
        GpuTenure.objects.filter(gpu=gpu, until__isnull=True).update(until=boundary)
        GpuTenure.objects.create(gpu=gpu, node=node, since=boundary)
        Gpu.objects.filter(pk=gpu.pk).update(node=node)
    gpu.node_id = node.pk


def forget_gpus() -> None:
    """Drop the process's GPU cache (tests rebuild the database under it)."""
    _gpus.clear()
    _node_names.clear()
    _last_seen.clear()
    owners.forget()
    forget_rules()
    forget_nodes()
