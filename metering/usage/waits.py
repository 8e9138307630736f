"""What the floor's measure reads of metering (loans.services.guarantee): the jobs of a tenant
that waited for GPUs, what the tenant held while they waited (from the raw samples, the
meter's own record; the accounting only cross-checks it), the GPU models each cluster has, and
how far back raw samples are kept."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.db.models.functions import Coalesce

from metering.models import Gpu, GpuHour, JobWait, RawHorizon, UsageSample
from metering.models.samples import MAX_INTERVAL_S
from metering.rollups import floor_hour

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


def _merged(spans: list[tuple[datetime, datetime]]) -> list[list[datetime]]:
    merged: list[list[datetime]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        elif b > a:
            merged.append([a, b])
    return merged


def held_during(tenant_id: int, spans: list[tuple[datetime, datetime]], model: str = ""
                ) -> list[Held]:
    """The tenant's allocated samples that overlap `spans`, as (from, to, share of a GPU), of
    GPUs of `model` (any model where empty): what it held while its jobs waited. Samples
    covering no span are never read."""
    return held_during_many({tenant_id: (spans, model)}).get(tenant_id, [])


def held_during_many(asked: dict[int, tuple[list[tuple[datetime, datetime]], str]]
                     ) -> dict[int, list[Held]]:
    """held_during for many tenants (tenant -> spans, model), in one query."""
    merged = {tenant: _merged(spans) for tenant, (spans, _model) in asked.items()}
    window = Q()
    for tenant, spans in merged.items():
        for a, b in spans:
            window |= Q(tenant_id=tenant, ts__lt=b, ts__gt=a - MAX_INTERVAL_S * SECOND)
    out: dict[int, list[Held]] = {tenant: [] for tenant in asked}
    if not any(merged.values()):
        return out
    rows = UsageSample.objects.filter(window, allocated=True).values_list(
        "tenant_id", "ts", "interval_s", "fraction", "gpu__model", "gpu__physical__model")
    for tenant, ts, interval, fraction, model, parent_model in rows:
        wanted = asked[tenant][1]
        if wanted and wanted not in (model, parent_model):
            continue
        until = ts + interval * SECOND
        if any(ts < b and until > a for a, b in merged[tenant]):
            out[tenant].append((ts, until, fraction))
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


def physical_at(asked: list[tuple[str, datetime]], window: timedelta) -> list[float]:
    """Physical GPUs of each (model, moment) asked (any model where empty) that held or
    reported anything in the `window` before the moment, from the hourly GPU rollups: the pool
    as it stood then, a GPU and its MIG instances counted once. One query for all."""
    if not asked:
        return []
    since = floor_hour(min(at for _m, at in asked) - window)
    rows = (GpuHour.objects.filter(hour__gte=since, hour__lt=max(at for _m, at in asked))
            .annotate(physical_gpu=Coalesce("gpu__physical_id", "gpu_id"),
                      model=Coalesce("gpu__physical__model", "gpu__model"))
            .values_list("physical_gpu", "model", "hour").distinct())
    seen = list(rows)
    return [float(len({gpu for gpu, gpu_model, hour in seen
                       if (not model or gpu_model == model)
                       and floor_hour(at - window) <= hour < at}))
            for model, at in asked]
