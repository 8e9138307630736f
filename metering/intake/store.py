"""What a batch looks like on its way to the sample table, and the sample-by-sample check that both
databases' writers share.

A batch travels as columns, one list or tuple per name in COLUMNS: (index in the batch, gpu
id, ts, tenant id, owner id, interval_s, allocated, fraction, util_pct, mem_used_mib, power_w,
temp_c, holder_unknown).

The sample-by-sample check decides each sample against what its device already stored, in time order
(the writers sort a batch by timestamp first):
a sample under a stored key is a duplicate when it repeats the stored reading exactly and a
conflict when it does not; a sample whose interval overlaps a stored sample of its device, or
one accepted before it in the batch, is refused as an overlap (the first stored wins); so is
one that would take its physical GPU's fractions past 1 at some moment, where the GPU has
several devices (MIG instances, replicas). The caller holds its devices' locks while it checks
and writes.
"""

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q
from django.db.models.functions import Coalesce

from metering.intake.columns import taken
from metering.models import Gpu, UsageSample

COLUMNS = ("idx", "gpu_id", "ts", "tenant_id", "owner_id", "interval_s", "allocated",
           "fraction", "util_pct", "mem_used_mib", "power_w", "temp_c", "holder_unknown")
# What a resent sample must repeat exactly; anything else under a stored key is a conflict.
READING = ("interval_s", "allocated", "fraction", "util_pct", "mem_used_mib", "power_w",
           "temp_c", "owner_id", "holder_unknown")
REAL = ("util_pct", "power_w")  # stored in four bytes on PostgreSQL
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
TOLERANCE = 1e-9  # seven slices of 1/7 sum to 0.9999999999999998 in floating point


def real(value: float | None) -> float | None:
    """A float as four bytes keep it (how PostgreSQL stores util_pct and power_w)."""
    return None if value is None else struct.unpack("f", struct.pack("f", value))[0]


@dataclass
class Intervals:
    """One device's stored samples near a batch: starts (sorted), ends and readings."""

    starts: list[datetime] = field(default_factory=list)
    ends: list[datetime] = field(default_factory=list)
    readings: dict[datetime, tuple] = field(default_factory=dict)

    def add(self, ts: datetime, end: datetime, reading: tuple | None = None) -> None:
        k = bisect.bisect(self.starts, ts)
        self.starts.insert(k, ts)
        self.ends.insert(k, end)
        if reading is not None:
            self.readings[ts] = reading

    def overlap(self, ts: datetime, end: datetime) -> tuple[datetime, datetime] | None:
        """A stored interval that [ts, end) overlaps, if any (they never overlap each other,
        so the neighbours on either side are all there is to look at)."""
        k = bisect.bisect_left(self.starts, ts)
        for j in (k - 1, k):
            if 0 <= j < len(self.starts) and self.starts[j] < end and ts < self.ends[j]:
                return self.starts[j], self.ends[j]
        return None


@dataclass
class Family:
    """The stored samples of one physical GPU's devices near a batch: starts (sorted), ends and
    fractions. An interval is at most an hour long."""

    starts: list[datetime] = field(default_factory=list)
    ends: list[datetime] = field(default_factory=list)
    fractions: list[float] = field(default_factory=list)

    def add(self, ts: datetime, end: datetime, fraction: float) -> None:
        k = bisect.bisect(self.starts, ts)
        self.starts.insert(k, ts)
        self.ends.insert(k, end)
        self.fractions.insert(k, fraction)

    def fits(self, ts: datetime, end: datetime, fraction: float) -> bool:
        """Whether [ts, end) with `fraction` keeps the GPU at most whole at every moment: the
        sum of intervals is highest at one's start, so the new start and the stored starts
        inside the new interval are all there is to look at."""
        low = bisect.bisect_left(self.starts, ts - HOUR)
        high = bisect.bisect_left(self.starts, end)
        near = range(low, high)
        moments = [ts] + [self.starts[j] for j in near if self.starts[j] > ts]
        for moment in moments:
            held = sum(self.fractions[j] for j in near
                       if self.starts[j] <= moment < self.ends[j])
            if held + fraction > 1 + TOLERANCE:
                return False
        return True


@dataclass
class Decision:
    accepted: list[int]  # positions in the batch's columns
    duplicates: int
    rejected: list[dict]  # {"index", "error"}


def check(columns: list, stored: dict[int, Intervals], names: list[str],
          same: Callable[[tuple, tuple], bool], families: dict[int, int] | None = None,
          family_stored: dict[int, Family] | None = None) -> Decision:
    """Decide each sample of the batch (columns as COLUMNS) against `stored`, each device's
    stored samples around the batch; `names` are the devices' uuids, for the messages;
    `same(offered, stored)` compares two readings as the database would store them.
    `families` maps the devices whose physical GPU has several to that GPU, and
    `family_stored` holds each such GPU's stored samples (stored_near gives both)."""
    (index, gpu, ts, _tenant, owner, interval, allocated, fraction, util, memory, power, temp,
     unknown) = columns
    families = families or {}
    family_stored = family_stored if family_stored is not None else {}
    accepted, duplicates, rejected = [], 0, []
    for k in range(len(index)):
        held = stored.setdefault(gpu[k], Intervals())
        start, end = ts[k], ts[k] + interval[k] * SECOND
        reading = (interval[k], allocated[k], fraction[k], util[k], memory[k], power[k],
                   temp[k], owner[k], unknown[k])
        if start in held.readings:
            if same(reading, held.readings[start]):
                duplicates += 1
            else:
                rejected.append({"index": index[k], "error": (
                    "conflict: a different sample is already stored for this gpu_uuid "
                    "and ts")})
            continue
        clash = held.overlap(start, end)
        if clash is not None:
            rejected.append({"index": index[k], "error": (
                f"overlap: {names[k]} already has a sample from {clash[0]:%Y-%m-%dT%H:%M:%SZ} "
                f"to {clash[1]:%Y-%m-%dT%H:%M:%SZ}; a device is counted once for each moment")})
            continue
        physical = families.get(gpu[k])
        if physical is not None:
            family = family_stored.setdefault(physical, Family())
            if not family.fits(start, end, fraction[k]):
                rejected.append({"index": index[k], "error": (
                    f"overlap: {names[k]} from {start:%Y-%m-%dT%H:%M:%SZ} would take its "
                    "physical GPU past one GPU (the fractions of its MIG instances or replicas "
                    "sum to more than 1); a physical GPU is counted once for each moment")})
                continue
            family.add(start, end, fraction[k])
        held.add(start, end)
        accepted.append(k)
    return Decision(accepted, duplicates, rejected)


def around(columns: list) -> tuple[list[int], datetime, datetime]:
    """The batch's devices and the span of stored starts that could touch it: an interval is
    at most an hour, so a stored sample that overlaps the batch starts at most an hour before
    its first start and before its last end."""
    _index, gpu, ts, _t, _o, interval, *_rest = columns
    last = max(t + i * SECOND for t, i in zip(ts, interval, strict=True))
    return sorted(set(gpu)), min(ts) - timedelta(hours=1), last


def in_time_order(columns: list, names: list[str]) -> tuple[list, list[str]]:
    """The batch by (ts, gpu id), the order in which agents send one: sorting it costs a
    single pass, and reordering nothing when it is in order already. One order for every
    batch also keeps concurrent writers from deadlocking."""
    keys = list(zip(columns[2], columns[1], strict=True))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    if order == list(range(len(keys))):
        return columns, names
    *columns, names = taken([*columns, names], order)
    return columns, names


def stored_near(columns: list, families: dict[int, int] | None = None
                ) -> tuple[dict[int, Intervals], dict[int, Family]]:
    """Each device's stored samples that could touch the batch, with their readings
    (READING), and those of every device of the physical GPUs in `families` (device id ->
    physical GPU id): what `check` decides against. The caller holds the devices' locks."""
    gpus, low, high = around(columns)
    stored: dict[int, Intervals] = {}
    for gpu_id, ts, *reading in UsageSample.objects.filter(
            gpu_id__in=gpus, ts__gte=low, ts__lt=high).values_list("gpu_id", "ts", *READING):
        stored.setdefault(gpu_id, Intervals()).add(ts, ts + reading[0] * SECOND, tuple(reading))
    kin: dict[int, Family] = {}
    physicals = set((families or {}).values())
    if physicals:
        members = dict(Gpu.objects.filter(Q(pk__in=physicals) | Q(physical_id__in=physicals))
                       .annotate(family=Coalesce("physical_id", "pk"))
                       .values_list("pk", "family"))
        for gpu_id, ts, interval_s, fraction in UsageSample.objects.filter(
                gpu_id__in=list(members), ts__gte=low, ts__lt=high).values_list(
                "gpu_id", "ts", "interval_s", "fraction"):
            kin.setdefault(members[gpu_id], Family()).add(ts, ts + interval_s * SECOND,
                                                          fraction)
    return stored, kin
