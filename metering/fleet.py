"""What operators see of the fleet: nodes with their data completeness, physical GPUs by
model, unattributed usage."""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Sum

from metering.models import Gpu, GpuHour, Node, TenantHour
from metering.usage import floor_hour

COMPLETENESS_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class NodeStatus:
    name: str
    default_tenant: str | None
    gpus: int
    last_seen_at: datetime | None
    agent_version: str
    dropped_samples: int
    completeness: float | None  # share of the window its GPUs reported, 0-1

    def silent_since(self, now: datetime) -> timedelta | None:
        return None if self.last_seen_at is None else now - self.last_seen_at


def node_status(now: datetime, window: timedelta = COMPLETENESS_WINDOW) -> list[NodeStatus]:
    """Every node, with the share of [now - window, now) its GPUs covered with samples (a GPU
    first seen inside the window is expected from then on). Read from the hourly rollups."""
    since = now - window
    covered = dict(
        GpuHour.objects.filter(hour__gte=floor_hour(since), hour__lt=now)
        .values("gpu_id").annotate(seconds=Sum("reported_s")).values_list("gpu_id", "seconds")
    )
    expected: Counter = Counter()
    reported: Counter = Counter()
    counts: Counter = Counter()
    for gpu_id, node_id, first_seen in Gpu.objects.values_list("id", "node_id", "first_seen_at"):
        counts[node_id] += 1
        span = (now - max(since, first_seen)).total_seconds()
        if span <= 0:
            continue
        expected[node_id] += span
        # A sample's interval can reach back before the window; never count more than it.
        reported[node_id] += min(covered.get(gpu_id, 0), span)
    return [
        NodeStatus(
            name=node.name,
            default_tenant=node.default_tenant.name if node.default_tenant else None,
            gpus=counts[node.pk],
            last_seen_at=node.last_seen_at,
            agent_version=node.agent_version,
            dropped_samples=node.dropped_samples,
            completeness=reported[node.pk] / expected[node.pk] if expected[node.pk] else None,
        )
        for node in Node.objects.select_related("default_tenant")
    ]


def gpus_by_model() -> dict[str, int]:
    """Physical GPUs the agents have registered, by model name ("" where none was reported)."""
    return dict(Counter(Gpu.objects.values_list("model", flat=True)))


def unattributed_gpu_hours(start: datetime, end: datetime) -> tuple[float, float]:
    """Allocated and busy GPU-hours no tenant claimed over the hours in [start, end)."""
    sums = TenantHour.objects.filter(tenant=None, hour__gte=start, hour__lt=end).aggregate(
        allocated=Sum("allocated_gpu_s"), busy=Sum("busy_gpu_s")
    )
    return (sums["allocated"] or 0.0) / 3600, (sums["busy"] or 0.0) / 3600


def gpu_labels(gpu_ids: set[int]) -> dict[int, str]:
    """"node/index" for each GPU, the name operators know it by."""
    return {
        pk: f"{node}/{index if index is not None else uuid[:12]}"
        for pk, node, index, uuid in Gpu.objects.filter(pk__in=gpu_ids).values_list(
            "pk", "node__name", "index", "uuid").order_by("node__name", "index", "uuid")
    }
