"""The device limit, at the sample's time (DESIGN.md, "Trust"): in every hour a batch covers,
a node reports at most `max_devices` physical GPUs, those it reported in that hour before and
the batch's new ones in batch order. Each process remembers the (hour, physical GPU)s it has
seen a node store, so a batch that adds none (an agent's steady state) costs no query; any
other batch costs one, under the node's limit lock (guarded) until the batch is stored. The
devices and their physical GPUs come from metering.intake.devices (resolve)."""

from collections import defaultdict
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from metering.intake.devices import Plan, Reason, is_mine
from metering.models import Gpu, GpuHour, GpuTenure, Node, UsageSample
from metering.rollups import HOUR, parts

# node id -> hour -> physical GPU uuids the node reported in that hour (stored, so lasting)
_hours_seen: dict[int, dict[datetime, set[str]]] = defaultdict(dict)


def forget() -> None:
    _hours_seen.clear()


def hours_of(batch, out: Plan) -> list[tuple[datetime, ...]]:
    """The hours each sample covers, worked out once a batch and once for each distinct
    (time, interval): an agent's batch repeats a few times over many GPUs."""
    if out.hours is None:
        known: dict[tuple, tuple] = {}
        out.hours = [known.get(pair) or known.setdefault(
            pair, tuple(hour for hour, _seconds, _starts in parts(*pair)))
            for pair in zip(batch.ts, batch.interval_s, strict=True)]
    return out.hours


def all_hours_seen(node: Node, batch, out: Plan) -> bool:
    """Whether every (hour, physical GPU) of the batch is one this process saw the node store:
    then the batch cannot take the node past its limit in any hour, and no query is needed."""
    seen = _hours_seen.get(node.pk, {})
    for key, hours in zip(out.keys, hours_of(batch, out), strict=True):
        if key is not None:
            for hour in hours:
                if key not in seen.get(hour, ()):
                    return False  # at the first: a batch of made-up devices stops here
    return True


# The first key of the PostgreSQL advisory locks that guard a node's device limit (the second
# is the node's id): any number that no other lock of the application uses.
LIMIT_LOCK = 47_01


@contextmanager
def guarded(node: Node):
    """A transaction holding the node's limit lock, in which its limit is read and its batch
    stored: two batches of one node cannot both add the last GPU an hour allows. On
    PostgreSQL an advisory lock, not the node's row: a batch that needs no guard updates the
    row last, after its devices' rows, and a guard taken first on the row would deadlock with
    it. SQLite runs one writer at a time."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LIMIT_LOCK, node.pk])
        yield


def remember(node: Node, batch, out: Plan, rejected: set[int]) -> None:
    """The (hour, physical GPU)s the batch's stored samples (and duplicates of stored ones) put
    on the node: a later batch adding no other needs no query. `rejected`: batch indexes."""
    seen = _hours_seen[node.pk]
    stored = {(key, hour) for k, (key, hours) in enumerate(
              zip(out.keys, hours_of(batch, out), strict=True))
              if key is not None and (not rejected or batch.index[k] not in rejected)
              for hour in hours}
    for key, hour in stored:
        seen.setdefault(hour, set()).add(key)
    if len(seen) > 96:  # what a steady agent needs: the last few days' hours
        for hour in sorted(seen)[:-72]:
            del seen[hour]


def limit(node: Node, batch, out: Plan, now: datetime) -> None:
    """Refuse the samples that would take the node past max_devices physical GPUs, in batch
    order (the caller holds guarded()): a GPU new to the node (or moving to it) also when the
    node's GPUs seen within the capacity window fill it (so made-up devices cannot take an hour
    before the node's own GPUs report in it), and every GPU in each hour its samples cover."""
    limit = node.max_devices
    past = _PastLimit(node, batch, limit)
    arriving = {key for k, key in enumerate(out.keys) if key is not None and (
        key in out.moving or (batch.gpu_uuid[k] in out.new and not is_mine(key, node)))}
    if arriving:
        since = now - timedelta(hours=settings.CAPACITY_WINDOW_HOURS)
        active = set(Gpu.objects.filter(node=node, last_seen_at__gte=since).annotate(
            key=Coalesce("physical__uuid", "uuid")).values_list("key", flat=True))
        for k, key in enumerate(out.keys):
            if key not in arriving:
                continue
            if key in active or len(active) < limit:
                active.add(key)
            else:
                out.refuse(k, past(k))
    wanted = [(k, hours) for k, (key, hours) in enumerate(
              zip(out.keys, hours_of(batch, out), strict=True)) if key is not None]
    present = _present(node, {hour for _k, hours in wanted for hour in hours})
    seen = _hours_seen[node.pk]
    for hour, keys in present.items():  # what is stored, and so lasts
        seen.setdefault(hour, set()).update(keys)
    for k, hours in wanted:  # in batch order: the first new GPUs of an hour are taken
        key = out.keys[k]
        if all(key in present[hour] or len(present[hour]) < limit for hour in hours):
            for hour in hours:
                present[hour].add(key)
        else:
            out.refuse(k, past(k))


class _PastLimit:
    """The refusal of sample k past the limit, its time written once for each distinct time
    (a refused batch of thousands of devices repeats a few)."""

    def __init__(self, node: Node, batch, limit: int):
        self.batch, self.times = batch, {}
        self.head = (f"device limit: node {node.name} may report at most {limit} GPUs "
                     "(max_devices) in an hour; ")

    def __call__(self, k: int) -> tuple[str, str, None]:
        ts = self.batch.ts[k]
        at = self.times.get(ts) or self.times.setdefault(ts, f"{ts:%Y-%m-%dT%H:%M:%SZ}")
        return (Reason.DEVICE_LIMIT, f"{self.head}{self.batch.gpu_uuid[k]} would be one more "
                                     f"at {at}", None)


def _present(node: Node, hours: set[datetime]) -> dict[datetime, set[str]]:
    """The physical GPUs the node reported in each hour: a device with samples in the hour from
    when this node held it. The hour's rollups say which devices had samples; where the node's
    tenure of a device begins or ends inside the hour (a move), its raw samples say whether
    those of the hour were this node's."""
    ever = GpuTenure.objects.filter(node=node).values("gpu_id")
    rows = GpuHour.objects.filter(
        Q(hour__in=hours, gpu_id__in=ever, gpu__tenures__node=node,
          gpu__tenures__since__lt=F("hour") + HOUR)
        & (Q(gpu__tenures__until__isnull=True) | Q(gpu__tenures__until__gt=F("hour")))
    ).values_list("hour", Coalesce("gpu__physical__uuid", "gpu__uuid"), "gpu_id",
                  "gpu__tenures__since", "gpu__tenures__until").distinct()
    present: dict[datetime, set[str]] = {hour: set() for hour in hours}
    edges = []
    for hour, key, gpu_id, since, until in rows:
        if since <= hour and (until is None or until >= hour + HOUR):
            present[hour].add(key)
        else:
            edges.append((hour, key, gpu_id, since, until))
    if edges:
        samples = defaultdict(list)
        for gpu_id, ts, interval_s in UsageSample.objects.filter(
                gpu_id__in={e[2] for e in edges}, ts__gte=min(e[0] for e in edges) - HOUR,
                ts__lt=max(e[0] for e in edges) + HOUR).values_list("gpu_id", "ts",
                                                                     "interval_s"):
            samples[gpu_id].append((ts, ts + timedelta(seconds=interval_s)))
        for hour, key, gpu_id, since, until in edges:
            if any(since <= ts and (until is None or ts < until) and ts < hour + HOUR
                   and end > hour for ts, end in samples[gpu_id]):
                present[hour].add(key)
    return present
