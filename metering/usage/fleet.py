"""What operators see of the fleet: nodes with their data completeness, physical GPUs by
model, unattributed usage."""

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from metering.models import (
    AttributionRule,
    DeviceRefusal,
    Gpu,
    GpuHour,
    Node,
    Owner,
    TenantHour,
    UsageSample,
)
from metering.rollups import HOUR
from metering.usage import floor_hour, sums_in

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
    # Where its GPUs were first seen inside the window: the completeness is of the time
    # since (a node that reported for one minute is 100% of that minute, not of a day).
    measured_from: datetime | None = None

    def silent_since(self, now: datetime) -> timedelta | None:
        return None if self.last_seen_at is None else now - self.last_seen_at


def _coverage(gpus: list[tuple[int, int, datetime]], start: datetime, end: datetime):
    """For GPUs `(id, node id, first seen)`: per node, the GPU-seconds of [start, end) expected
    (from first sight) and reported (capped at what was expected), from the rollups."""
    reported_by_gpu = dict(
        GpuHour.objects.filter(gpu_id__in=[g for g, _n, _f in gpus], hour__gte=floor_hour(start),
                               hour__lt=end)
        .values("gpu_id").annotate(seconds=Sum("reported_s")).values_list("gpu_id", "seconds")
    )
    expected: Counter = Counter()
    reported: Counter = Counter()
    for gpu_id, node_id, first_seen in gpus:
        span = (end - max(start, first_seen)).total_seconds()
        if span <= 0:
            continue
        expected[node_id] += span
        # A sample's interval can reach past the window; never count more than expected.
        reported[node_id] += min(reported_by_gpu.get(gpu_id, 0.0), span)
    return expected, reported


def node_status(now: datetime, window: timedelta = COMPLETENESS_WINDOW) -> list[NodeStatus]:
    """Every node, with the share of [now - window, now) its GPUs covered with samples (a GPU
    first seen inside the window is expected from then on). Read from the hourly rollups."""
    gpus = list(Gpu.objects.values_list("id", "node_id", "first_seen_at"))
    expected, reported = _coverage(gpus, now - window, now)
    counts = Counter(node_id for _g, node_id, _f in gpus)
    first: dict[int, datetime] = {}
    for _gpu, node_id, seen in gpus:
        if seen is not None and (node_id not in first or seen < first[node_id]):
            first[node_id] = seen
    start = now - window
    return [
        NodeStatus(
            name=node.name,
            default_tenant=node.default_tenant.name if node.default_tenant else None,
            gpus=counts[node.pk],
            last_seen_at=node.last_seen_at,
            agent_version=node.agent_version,
            dropped_samples=node.dropped_samples,
            completeness=reported[node.pk] / expected[node.pk] if expected[node.pk] else None,
            measured_from=first[node.pk] if first.get(node.pk, start) > start else None,
        )
        for node in Node.objects.select_related("default_tenant")
    ]


@dataclass(frozen=True)
class Coverage:
    """How much of a range the meter heard from a tenant's devices."""

    share: float  # reported GPU-seconds over expected, 0-1; 1 where nothing was expected
    data_from: datetime | None  # the first report, where it came after the range's start


def tenant_completeness(tenant_id: int, start: datetime, end: datetime) -> float:
    """Share of [start, end) the tenant's nodes reported (tenant_coverage_in)."""
    return tenant_coverage_in(tenant_id, [(start, end)])[0].share


def tenant_completeness_in(tenant_id: int,
                           ranges: list[tuple[datetime, datetime]]) -> list[float]:
    return [c.share for c in tenant_coverage_in(tenant_id, ranges)]


def tenant_coverage_in(tenant_id: int,
                       ranges: list[tuple[datetime, datetime]]) -> list[Coverage]:
    """For each of several ranges that do not overlap (a contract's periods), in four queries
    whatever their number: the share of it the tenant's devices reported (every GPU of the
    nodes that carried its usage there, or default to it), and from when data exists.

    A GPU is expected from its first sighting, so a node added while the others report is not
    missing before it came. But hours in which the meter heard none of the tenant's devices
    cannot tell "not there yet" from "not reporting": the GPUs first heard with the earliest
    report are expected from the range's start, and the silence before counts as missing."""
    return tenants_coverage_in([(tenant_id, ranges)])[0]


def tenants_coverage_in(asked: list[tuple[int, list[tuple[datetime, datetime]]]]
                        ) -> list[list[Coverage]]:
    """tenant_coverage_in for each of several tenants (a sharing group's members, closed
    together), in four queries whatever their number."""
    wanted_ranges = [(floor_hour(start), end) for _t, ranges in asked for start, end in ranges]
    if not wanted_ranges:
        return [[] for _a in asked]
    tenants = {tenant for tenant, ranges in asked if ranges}
    hours = sorted(set(wanted_ranges))
    at = {span: k for k, span in enumerate(hours)}
    carried = sums_in(GpuHour.objects.filter(tenant_id__in=tenants), "hour", hours,
                      ("tenant_id", "gpu_id"), rows=Count("pk"))
    carrying = {gpu for found in carried for (_tenant, gpu) in found}
    node_of = dict(Gpu.objects.filter(pk__in=carrying).values_list("id", "node_id"))
    defaulting: dict[int, set[int]] = defaultdict(set)
    for pk, tenant in Node.objects.filter(default_tenant_id__in=tenants).values_list(
            "pk", "default_tenant_id"):
        defaulting[tenant].add(pk)
    last = max(end for _s, end in hours)
    gpus = list(Gpu.objects.filter(
        node_id__in=set(node_of.values()) | {n for nodes in defaulting.values() for n in nodes},
        first_seen_at__lt=last).values_list("id", "node_id", "first_seen_at"))
    reported = sums_in(GpuHour.objects.filter(gpu_id__in=[g for g, _n, _f in gpus]), "hour",
                       hours, ("gpu_id",), seconds=Sum("reported_s"))
    out = []
    for tenant, ranges in asked:
        mine = []
        for start, end in ranges:
            k = at[(floor_hour(start), end)]
            found = [gpu for (holder, gpu) in carried[k] if holder == tenant]
            mine.append(_covered(start, end, found, node_of, defaulting[tenant], gpus,
                                 reported[k]))
        out.append(mine)
    return out


def _covered(start: datetime, end: datetime, found: list[int], node_of: dict[int, int],
             defaulting: set[int], gpus: list[tuple[int, int, datetime]], seconds: dict
             ) -> Coverage:
    # The nodes that carried the tenant's usage in this range, or default to it.
    wanted = {node_of[gpu] for gpu in found} | defaulting
    present = [(gpu_id, max(start, first_seen)) for gpu_id, node_id, first_seen in gpus
               if node_id in wanted and first_seen < end]
    if not present:
        return Coverage(1.0, None)
    first_heard = min(since for _g, since in present)
    expected = covered = 0.0
    for gpu_id, since in present:
        if floor_hour(since) <= floor_hour(first_heard):
            since = start  # heard with the first report: the silence before was missed
        span = (end - since).total_seconds()
        expected += span
        # A sample's interval can reach past the range; never count more than expected.
        covered += min(seconds.get((gpu_id,), {}).get("seconds", 0.0), span)
    return Coverage(covered / expected if expected else 1.0,
                    first_heard if first_heard > start else None)


def gpus_by_model(since: datetime) -> dict[str, float]:
    """Physical GPUs of each reported model that reported since `since` (the capacity
    window): each counted once, however many of its devices reported (the whole GPU, then its
    MIG instances or replicas), as the shares of its devices that did, at most one GPU;
    devices of no reported model are left out."""
    rows = Gpu.objects.filter(last_seen_at__gte=since).exclude(model="").annotate(
        gpu=Coalesce("physical_id", "pk")).values("model", "gpu").annotate(
        shares=Sum("share")).values_list("model", "shares")
    out: dict[str, float] = defaultdict(float)
    for model, shares in rows:
        out[model] += min(1.0, shares)
    return {model: round(gpus, 6) for model, gpus in out.items()}  # seven 1/7 are one GPU


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


def held_whole_hour(hour: datetime) -> list[tuple[int, int, float, float]]:
    """(tenant id, GPU id, allocated GPU-s, busy GPU-s) of GPUs a tenant held for the whole
    of `hour` (the idle-GPU alert's evidence)."""
    rows = GpuHour.objects.filter(hour=hour, tenant__isnull=False,
                                  allocated_gpu_s__gte=3600 * 0.999)
    return list(rows.values_list("tenant_id", "gpu_id", "allocated_gpu_s", "busy_gpu_s"))


def holders_in(hour: datetime, gpu_ids: set[int]) -> dict[int, str]:
    """Who held each of these GPUs in `hour`, by the owner its allocated samples named most:
    a pod as namespace/pod, a Slurm job as "job N (account)" (what the idle-GPU alert names);
    GPUs whose samples named nobody are left out."""
    counts = (UsageSample.objects.filter(gpu_id__in=gpu_ids, ts__gte=hour, ts__lt=hour + HOUR,
                                         allocated=True, owner__isnull=False)
              .values_list("gpu_id", "owner_id").annotate(n=Count("*")).order_by("gpu_id", "-n",
                                                                                  "owner_id"))
    most: dict[int, int] = {}
    for gpu_id, owner_id, _n in counts:
        most.setdefault(gpu_id, owner_id)
    owners = Owner.objects.in_bulk(set(most.values()))
    named = {gpu_id: holder_label(owners[owner_id]) for gpu_id, owner_id in most.items()}
    return {gpu_id: label for gpu_id, label in named.items() if label}


def holder_label(owner: Owner) -> str:
    if owner.pod:
        return f"{owner.namespace}/{owner.pod}" if owner.namespace else owner.pod
    if owner.job:
        return f"job {owner.job} ({owner.account})" if owner.account else f"job {owner.job}"
    return ""


def silent_nodes(since: datetime) -> list[Node]:
    """Nodes whose last batch came before `since`, and nodes registered before it that never
    sent one (last_seen_at None)."""
    return list(Node.objects.filter(Q(last_seen_at__lt=since)
                                    | Q(last_seen_at__isnull=True, created_at__lt=since)))


def recent_refusals(since: datetime) -> list[DeviceRefusal]:
    """Devices the meter refused since `since`, with their node and holder."""
    return list(DeviceRefusal.objects.filter(last_at__gte=since).select_related("node", "holder"))


def slurm_accounts(cluster_id: int) -> list[tuple[int, str]]:
    """(tenant id, Slurm account) of the account rules of a cluster, a tenant's first rule
    first (lower priority first); an account two tenants claim goes to the first."""
    rules = AttributionRule.objects.filter(cluster_id=cluster_id,
                                           field=AttributionRule.Field.ACCOUNT).order_by(
        "priority", "pk").values_list("tenant_id", "value")
    seen: set[str] = set()
    out = []
    for tenant_id, account in rules:
        if account not in seen:
            seen.add(account)
            out.append((tenant_id, account))
    return out


def first_namespace(tenant_id: int) -> str | None:
    """The namespace a tenant's attribution rules name first (lower priority first)."""
    rule = AttributionRule.objects.filter(
        tenant_id=tenant_id, field=AttributionRule.Field.NAMESPACE).order_by("priority",
                                                                             "pk").first()
    return rule.value if rule else None
