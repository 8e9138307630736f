"""Which devices a batch may report, and as which physical GPUs (DESIGN.md, "Trust").

A node's token reports only that node's devices: a device another node holds is refused until
that node has been silent about it for the move window, and only within one cluster (an
operator moves a GPU into another cluster). The hours a node reported before a device moved
away stay its own, so samples it spooled from then are accepted. A MIG instance or time-sliced
replica is part of a physical GPU (the parent the agent names, else the replica's id before
`::`, else the node's GPU at the instance's index), which must be this node's.

The device limit, which holds at the sample's time, is metering.intake.device_limit's. Devices
refused cost nothing more: one row a node and reason (metering.models.DeviceRefusal).
"""

import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, F, Max, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from metering.models import (
    TENURE_START,
    DeviceRefusal,
    Gpu,
    GpuTenure,
    Node,
    hand_over,
    is_part,
    physical_key,
    share_of,
)

GPU_CACHE_SECONDS = 60
Reason = DeviceRefusal.Reason


@dataclass(frozen=True, slots=True)
class Known:
    """A registered device as this process last read it."""

    id: int
    node_id: int
    cluster_id: int
    index: int | None
    model: str
    memory: int | None
    physical_id: int | None  # NULL: a whole GPU, its own physical GPU
    physical_uuid: str
    shared: bool  # a whole GPU with parts
    last_seen_at: datetime | None
    held_since: datetime  # since when its node has held it: earlier hours are another's
    cached_at: float

    @property
    def family(self) -> int | None:
        """The physical GPU whose devices' fractions are checked together, if it has several."""
        if self.physical_id is not None:
            return self.physical_id
        return self.id if self.shared else None


_gpus: dict[str, Known] = {}
_node_names: dict[int, str] = {}  # node id -> name, for refusal messages


def forget() -> None:
    _gpus.clear()
    _node_names.clear()


@dataclass
class Plan:
    """What may be stored of a batch: each sample's physical GPU and device id (None: refused,
    with why in `errors`) and the checks the writers need."""

    keys: list[str | None]  # each sample's physical GPU uuid
    ids: list[int | None]
    errors: dict[int, tuple[str, str, int | None]] = field(default_factory=dict)
    # position -> (DeviceRefusal reason, message for the agent, holder node id)
    families: dict[int, int] = field(default_factory=dict)  # device id -> physical GPU id
    new: dict[str, "_New"] = field(default_factory=dict)
    moving: dict[str, int] = field(default_factory=dict)  # physical uuid -> its id
    spooled: set[int] = field(default_factory=set)  # positions within this node's old tenure
    hours: list | None = None  # each sample's hours (hours_of)

    def refuse(self, k: int, why: tuple[str, str, int | None]) -> None:
        self.errors[k] = why
        self.keys[k] = None


@dataclass
class _New:
    uuid: str
    key: str  # its physical GPU's uuid (its own for a whole GPU)
    index: int | None
    model: str
    memory: int | None
    share: float


def resolve(node: Node, batch, now: datetime) -> Plan:
    """Each sample's physical GPU, or why its device is refused (metering.intake.protocol
    Columns); the limit (limit(), all_hours_seen()) and the registration (register()) come next."""
    here = node.pk  # a property: read once, not once a sample
    latest = {}
    for k, uuid in enumerate(batch.gpu_uuid):
        latest[uuid] = k  # the last sample of each device names its index, model, parent
    wholes = _refresh(node, latest, batch, now)
    for uuid, k in latest.items():  # a GPU new in this batch is its MIG instances' parent too
        index = batch.gpu_index[k]
        if (index is not None and uuid not in _gpus and not batch.parent_uuid[k]
                and not is_part(uuid) and not uuid.startswith("index:")):
            wholes.setdefault(index, uuid)
    out = Plan(keys=[None] * len(batch.gpu_uuid), ids=[None] * len(batch.gpu_uuid))
    elsewhere = [uuid for uuid in latest if uuid in _gpus and _gpus[uuid].node_id != here]
    tenures = _own_tenures(node, elsewhere)
    # The physical GPU each device new to this process names, worked out once.
    keys = {uuid: _key(uuid, batch.gpu_index[k], batch.parent_uuid[k], node, wholes)
            for uuid, k in latest.items() if uuid not in _gpus}
    quiet = _quiet(node, [_gpus[uuid] for uuid in elsewhere]
                   + [_gpus[key] for key in keys.values() if key in _gpus], now)
    # New devices that are parts here: never a parent, whatever the batch order (no chain, no
    # cycle).
    parts = {uuid for uuid, key in keys.items() if key != uuid}
    refused: dict[str, tuple] = {}
    for uuid, k in latest.items():
        known = _gpus.get(uuid)
        if known is None:
            key = keys[uuid]
            parent = _gpus.get(key) if key != uuid else None
            if key in parts or (parent is not None and parent.physical_id is not None):
                refused[uuid] = (Reason.PARENT, (
                    f"parent: {key} is a part of a GPU, not a GPU; name the physical GPU as "
                    "parent_uuid"), None)
                continue
            if parent is not None and parent.node_id != here:
                if (parent.physical_id or parent.id) not in quiet:
                    refused[uuid] = (Reason.PARENT, (
                        f"parent: {uuid}'s GPU {key} is reported by node "
                        f"{_name(parent.node_id)}"), parent.node_id)
                    continue
                out.moving[key] = parent.id
            out.new[uuid] = _New(uuid, key, batch.gpu_index[k], batch.model[k] or "",
                                 batch.mem_total_mib[k], share_of(uuid, batch.fraction[k]))
        elif known.node_id != here and (known.physical_id or known.id) in quiet:
            out.moving[known.physical_uuid] = known.physical_id or known.id
    for k, uuid in enumerate(batch.gpu_uuid):
        known = _gpus.get(uuid)
        if uuid in refused:
            out.refuse(k, refused[uuid])
        elif known is None:
            out.keys[k] = out.new[uuid].key
        elif known.node_id == here or known.physical_uuid in out.moving:
            out.keys[k] = known.physical_uuid
        elif _within(tenures.get(uuid, ()), batch.ts[k], batch.interval_s[k]):
            # Hours the node reported before the device moved away are still its own.
            out.keys[k] = known.physical_uuid
            out.spooled.add(k)
        elif known.physical_id is None and known.last_seen_at is None:
            out.refuse(k, _claimed_as_parent(uuid, known))
        else:
            out.refuse(k, _held_elsewhere(uuid, known, node))
    return out


def _claimed_as_parent(uuid: str, known: Known) -> tuple[str, str, int]:
    """A GPU another node named as its devices' parent, which never reported it itself, is
    reported whole here: a conflict operators settle by moving it (alerted, both named)."""
    name = _name(known.node_id)
    return (Reason.PARENT_CLAIM,
            f"named as the parent of its devices by node {name} first: {uuid} is reported "
            "here once an operator moves it to this node", known.node_id)


def _key(uuid: str, index: int | None, parent: str | None, node: Node,
         wholes: dict[int, str]) -> str:
    """physical_key, where a MIG instance naming no parent is part of the node's registered
    whole GPU at its index when there is one."""
    if not parent and uuid.startswith("MIG-") and index in wholes:
        return wholes[index]
    return physical_key(uuid, index, parent, node.name)


def is_mine(key: str, node: Node) -> bool:
    """Whether the physical GPU is registered as this node's (as this process last read it)."""
    known = _gpus.get(key)
    return known is not None and known.node_id == node.pk


def _refresh(node: Node, latest: dict[str, int], batch, now: datetime) -> dict[int, str]:
    """Read the devices this process has not seen lately (and the physical GPUs that new ones
    name), and update what the agent reports differently of this node's own; returns the
    node's whole GPUs by index, where new MIG instances name no parent."""
    here = node.pk
    clock = time.monotonic()
    stale = [uuid for uuid in latest if uuid not in _gpus
             or clock - _gpus[uuid].cached_at > GPU_CACHE_SECONDS]
    wanted = set(stale)
    for uuid in stale:
        k = latest[uuid]
        wanted.add(physical_key(uuid, batch.gpu_index[k], batch.parent_uuid[k], node.name))
    wholes: dict[int, str] = {}
    if wanted:
        _load(wanted, clock)
        wholes = _whole_at_indexes(node, [batch.gpu_index[latest[u]] for u in stale
                                          if u.startswith("MIG-") and u not in _gpus
                                          and not batch.parent_uuid[latest[u]]])
        _load(set(wholes.values()), clock)
    seen = []
    for uuid, k in latest.items():
        known = _gpus.get(uuid)
        if known is None or known.node_id != here:
            continue
        seen.append(known.id)
        fields = {name: new for name, old, new in (
            ("index", known.index, batch.gpu_index[k]), ("model", known.model, batch.model[k]),
            ("memory_total_mib", known.memory, batch.mem_total_mib[k]))
            if new is not None and new != old}
        if fields:
            Gpu.objects.filter(pk=known.id).update(**fields)
            _load({uuid}, clock)
    if stale:
        _seen_gpus(seen, now)
    return wholes


def _whole_at_indexes(node: Node, indexes: list[int | None]) -> dict[int, str]:
    """The uuids of the node's whole GPUs at these indexes (a MIG instance that names no parent
    is part of the GPU at its index)."""
    wanted = {i for i in indexes if i is not None}
    if not wanted:
        return {}
    found = Gpu.objects.filter(node=node, index__in=wanted, physical__isnull=True).exclude(
        uuid__startswith="MIG-").exclude(uuid__contains="::").exclude(uuid__contains="/").exclude(
        uuid__startswith="index:").order_by("-uuid").values_list("index", "uuid")
    return dict(found)  # the first uuid at an index, where several are


def _uuid_in(uuids: list[str]):
    """A filter on the device's uuid: on PostgreSQL one array parameter, not one placeholder a
    uuid (a batch of 5,000 made-up devices cost 40-100 ms of compiling and planning)."""
    if connection.vendor == "postgresql":
        return RawSQL('"metering_gpu"."uuid" = ANY(%s)', [uuids], output_field=BooleanField())
    return Q(uuid__in=uuids)


def _load(uuids: set[str], clock: float) -> None:
    if not uuids:
        return
    since = GpuTenure.objects.filter(gpu=OuterRef("pk"), until__isnull=True).values("since")
    rows = Gpu.objects.filter(_uuid_in(list(uuids))).annotate(held_since=Subquery(since[:1]))
    for (uuid, pk, node_id, cluster_id, node_name, index, model, memory, physical_id,
         physical_uuid, shared, last_seen, held_since) in rows.values_list(
            "uuid", "pk", "node_id", "node__cluster_id", "node__name", "index", "model",
            "memory_total_mib", "physical_id", "physical__uuid", "shared", "last_seen_at",
            "held_since"):
        _node_names[node_id] = node_name
        _gpus[uuid] = Known(pk, node_id, cluster_id, index, model, memory, physical_id,
                            physical_uuid or uuid, shared, last_seen, held_since or TENURE_START,
                            clock)


def _quiet(node: Node, others: list[Known], now: datetime) -> set[int]:
    """The physical GPUs of these devices (held by other nodes) that may move to `node`: within
    its cluster, and silent on their node, every device of theirs, for the move window. One
    query however many devices."""
    physicals = {known.physical_id or known.id for known in others
                 if known.cluster_id == node.cluster_id and known.node_id != node.pk}
    if not physicals:
        return set()
    window = timedelta(minutes=settings.DEVICE_MOVE_MINUTES)
    last = dict(Gpu.objects.filter(Q(pk__in=physicals) | Q(physical_id__in=physicals))
                .annotate(family=Coalesce("physical_id", "pk")).values("family")
                .annotate(last=Max("last_seen_at")).values_list("family", "last"))
    return {p for p in physicals if last.get(p) is None or now - last[p] >= window}


def _held_elsewhere(uuid: str, known: Known, node: Node) -> tuple[str, str, int]:
    name = _name(known.node_id)
    if known.cluster_id != node.cluster_id:
        return (Reason.OTHER_CLUSTER,
                f"reported by node {name} of another cluster: {uuid} moves to this node "
                "only when an operator moves it", known.node_id)
    minutes = settings.DEVICE_MOVE_MINUTES
    return (Reason.OTHER_NODE,
            f"reported by node {name}: {uuid} moves to this node once {name} has not "
            f"reported it for {minutes} minutes", known.node_id)


def _name(node_id: int) -> str:
    return _node_names.get(node_id, f"#{node_id}")


def _own_tenures(node: Node, uuids: list[str]) -> dict[str, list[tuple]]:
    """This node's past tenures of devices another node holds now: (since, until) each."""
    if not uuids:
        return {}
    out: dict[str, list[tuple]] = defaultdict(list)
    for uuid, since, until in GpuTenure.objects.filter(
            node=node, gpu__uuid__in=uuids, until__isnull=False).values_list(
            "gpu__uuid", "since", "until"):
        out[uuid].append((since, until))
    return dict(out)


def _within(tenures, ts: datetime, interval_s: int) -> bool:
    end = ts + timedelta(seconds=interval_s)
    return any(since <= ts and end <= until for since, until in tenures)


def register(node: Node, batch, out: Plan, now: datetime) -> None:
    """Register the new devices left with a sample to store (and the physical GPUs they name,
    where not registered), move the families arriving here, and give each sample left its
    device id."""
    here = node.pk
    wanted = []
    if out.new:  # the steady state has none: no pass over the batch for them
        used = {batch.gpu_uuid[k] for k, key in enumerate(out.keys) if key is not None}
        wanted = [n for n in out.new.values() if n.uuid in used]
    first: dict[str, datetime] = {}  # each arriving family's first sample in the batch
    for k, key in enumerate(out.keys if out.moving else ()):
        if key in out.moving:
            first[key] = min(first.get(key, batch.ts[k]), batch.ts[k])
    moved = {out.moving[key] for key in first}
    for key in sorted(first):
        _move_family(out.moving[key], node, first[key], now)
    clock = time.monotonic()
    if wanted:
        names = ({n.key for n in wanted if n.key != n.uuid and n.key not in _gpus}
                 - {n.uuid for n in wanted})  # a GPU registered in this batch as itself
        first = {}
        for n in wanted:
            first.setdefault(n.key, n)
        rows = [Gpu(uuid=key, node=node, index=first[key].index, model=first[key].model,
                    first_seen_at=now, last_seen_at=None) for key in sorted(names)]
        rows += [Gpu(uuid=n.uuid, node=node, index=n.index, model=n.model,
                     memory_total_mib=n.memory, first_seen_at=now, last_seen_at=now,
                     share=n.share) for n in wanted]
        Gpu.objects.bulk_create(rows, ignore_conflicts=True)
        mine = Gpu.objects.filter(uuid__in=[r.uuid for r in rows], node=node, first_seen_at=now)
        GpuTenure.objects.bulk_create(GpuTenure(gpu_id=pk, node=node, since=TENURE_START)
                                      for pk in mine.values_list("pk", flat=True))
        _load({r.uuid for r in rows} | {n.key for n in wanted}, clock)
        families = defaultdict(list)
        for n in wanted:
            device, physical = _gpus.get(n.uuid), _gpus.get(n.key)
            if (n.key != n.uuid and device is not None and physical is not None
                    and device.node_id == here == physical.node_id):
                families[physical.id].append(device.id)
        for physical, devices in families.items():
            Gpu.objects.filter(pk__in=devices, physical__isnull=True).update(physical=physical)
            Gpu.objects.filter(pk=physical).update(shared=True)
        _load({r.uuid for r in rows} | {n.key for n in wanted}, clock)
    if moved:
        _load({uuid for uuid, known in _gpus.items()
               if (known.physical_id or known.id) in moved}, clock)
    for k, uuid in enumerate(batch.gpu_uuid):
        if out.keys[k] is None:
            continue
        known = _gpus.get(uuid)
        if known is None or (known.node_id != here and k not in out.spooled):
            # Another node registered it a moment ago, or its family lives elsewhere.
            holder = known.node_id if known is not None else None
            out.refuse(k, (Reason.OTHER_NODE, f"reported by node {_name(holder)}: {uuid} is "
                           "not this node's", holder))
            continue
        if k not in out.spooled and batch.ts[k] < known.held_since:
            out.refuse(k, (Reason.OTHER_NODE, (
                f"before this node held it: {uuid} moved here at "
                f"{known.held_since:%Y-%m-%dT%H:%M:%SZ}; the hours before are the node's "
                "that held it then"), None))
            continue
        out.ids[k] = known.id
        if known.family is not None:
            out.families[known.id] = known.family


def _move_family(physical: int, node: Node, first: datetime, now: datetime) -> None:
    """Every device of the physical GPU is this node's from its first sample here on (never
    before the end of the old node's last stored one): the node that reported it keeps its
    hours, and may still send those it spooled before. The family is seen now, so that a third
    node cannot take it at once."""
    hand_over(physical, node, lambda covered: max(covered or TENURE_START, first), seen_at=now)


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


def record_refusals(node: Node, batch, errors: dict[int, tuple], now: datetime) -> None:
    """One row a node and reason, whatever the number of devices (the alert job reads them)."""
    by_reason: dict[str, list] = defaultdict(list)
    for k, (reason, _message, holder) in sorted(errors.items()):
        by_reason[reason].append((batch.gpu_uuid[k], holder))
    for reason, refused in by_reason.items():
        devices = len({uuid for uuid, _holder in refused})
        uuid, holder = refused[0]
        updated = DeviceRefusal.objects.filter(node=node, reason=reason).update(
            last_at=now, gpu_uuid=uuid, holder_id=holder, devices=devices,
            samples=F("samples") + len(refused))
        if not updated:
            DeviceRefusal.objects.get_or_create(node=node, reason=reason, defaults={
                "first_at": now, "last_at": now, "gpu_uuid": uuid, "holder_id": holder,
                "devices": devices, "samples": len(refused)})

