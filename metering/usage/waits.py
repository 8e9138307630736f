"""What the floor's measure reads of metering (loans.services.guarantee): the jobs of a tenant
that waited for GPUs, what the tenant held while they waited (from the raw samples, the
meter's own record; the accounting only cross-checks it), the GPU models each cluster has, and
how far back raw samples are kept."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from metering.models import Gpu, JobWait, RawHorizon, UsageSample
from metering.models.samples import MAX_INTERVAL_S

SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class Wait:
    """A job that waited, as the measure and the pages read it."""

    cluster_id: int
    cluster: str
    scheduler: str
    name: str
    gpus: int
    gpu_type: str
    submitted: datetime
    eligible: datetime | None
    started: datetime | None
    ended: datetime | None
    reason: str
    capacity: bool
    qos: str


def waits_in(tenant_ids: list[int], start: datetime, end: datetime) -> dict[int, list[Wait]]:
    """Each tenant's jobs that waited at some moment of [start, end), in one query."""
    rows = (JobWait.objects.filter(tenant_id__in=tenant_ids, submitted__lt=end)
            .exclude(started__lte=start).exclude(started__isnull=True, ended__lte=start)
            .select_related("cluster").order_by("submitted", "pk"))
    out: dict[int, list[Wait]] = {pk: [] for pk in tenant_ids}
    for w in rows:
        out[w.tenant_id].append(Wait(w.cluster_id, w.cluster.name, w.scheduler, w.name, w.gpus,
                                     w.gpu_type, w.submitted, w.eligible, w.started, w.ended,
                                     w.reason, w.capacity, w.qos))
    return out


Held = tuple[datetime, datetime, float]  # from, to, GPUs (fractions of MIG instances)


def held_during(tenant_id: int, spans: list[tuple[datetime, datetime]], model: str = ""
                ) -> list[Held]:
    """The tenant's allocated samples that overlap `spans`, as (from, to, share of a GPU), of
    GPUs of `model` (any model where empty): what it held while its jobs waited. Samples
    covering no span are never read."""
    merged: list[list[datetime]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        elif b > a:
            merged.append([a, b])
    if not merged:
        return []
    window = Q()
    for a, b in merged:
        window |= Q(ts__lt=b, ts__gt=a - MAX_INTERVAL_S * SECOND)
    samples = UsageSample.objects.filter(window, tenant_id=tenant_id, allocated=True)
    if model:
        samples = samples.filter(Q(gpu__model=model) | Q(gpu__physical__model=model))
    out = []
    for ts, interval, fraction in samples.values_list("ts", "interval_s", "fraction"):
        until = ts + interval * SECOND
        if any(ts < b and until > a for a, b in merged):
            out.append((ts, until, fraction))
    return out


def cluster_models() -> dict[int, set[str]]:
    """The whole-GPU models each cluster's nodes have reported."""
    out: dict[int, set[str]] = {}
    for cluster, model in (Gpu.objects.filter(physical__isnull=True).exclude(model="")
                           .values_list("node__cluster_id", "model").distinct()):
        out.setdefault(cluster, set()).add(model)
    return out


def raw_kept_from() -> datetime | None:
    """The oldest instant whose raw samples are still kept (None: none purged yet)."""
    horizon = RawHorizon.objects.first()
    return horizon.purged_before if horizon else None
