"""The agents' meter against Slurm's own accounting (metering.schedulers.slurm), per tenant and day:
how an operator finds a missing agent, a wrong attribution rule or a job that never reached the
meter.

Both sides are read for one Slurm cluster: the agents' allocated GPU-hours of the GPUs of that
cluster's nodes, and the GPU-hours Slurm's jobs held there, attributed to tenants by the same
rules (an account or user rule of that cluster).
"""

import bisect
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db.models import Sum

from metering.attribution import Attributor, Rule
from metering.models import AttributionRule, Cluster, GpuHour, SlurmHour
from metering.usage import floor_hour, local_days


@dataclass(frozen=True)
class DayCheck:
    cluster: str
    tenant_id: int | None  # None: usage no rule claims
    day: date
    agents_gpu_hours: float
    slurm_gpu_hours: float

    @property
    def difference(self) -> float:
        """The agents' GPU-hours less Slurm's: negative where the meter missed usage."""
        return self.agents_gpu_hours - self.slurm_gpu_hours

    @property
    def share(self) -> float:
        """The difference as a share of the larger side (0 when both are 0)."""
        larger = max(self.agents_gpu_hours, self.slurm_gpu_hours)
        return self.difference / larger if larger else 0.0

    def alarming(self, percent: float, min_gpu_hours: float) -> bool:
        """Apart by more than `percent` of the larger side and by `min_gpu_hours` at least
        (SLURM_MISMATCH_PERCENT, SLURM_MISMATCH_MIN_GPU_HOURS: the alert's rule)."""
        return abs(self.share) * 100 > percent and abs(self.difference) >= min_gpu_hours


def find_slurm_cluster(name: str | None) -> Cluster:
    """The named cluster, or the only Slurm cluster there is; LookupError saying why not."""
    if name:
        try:
            return Cluster.objects.get(name=name)
        except Cluster.DoesNotExist:
            raise LookupError(f"No cluster named {name!r}; add it in the admin (Clusters) "
                              "first.") from None
    found = list(Cluster.objects.filter(kind=Cluster.Kind.SLURM)[:2])
    if len(found) != 1:
        raise LookupError("Name the cluster with --cluster: there is "
                          + ("no Slurm cluster." if not found else "more than one."))
    return found[0]


def slurm_clusters() -> list[Cluster]:
    """Clusters with Slurm accounting imported."""
    return list(Cluster.objects.filter(slurm_hours__isnull=False).distinct().order_by("name"))


def reconcile(cluster: Cluster, start: datetime, end: datetime, zone: ZoneInfo,
              tenant_id: int | None = None) -> list[DayCheck]:
    """Each (tenant, local day of `zone`) in [start, end) that either side metered, for one
    tenant or all; days by tenant, then day."""
    days = local_days(start, end, zone)
    if not days:
        return []
    day_of = _day_finder(days)
    agents: dict[tuple[int | None, date], float] = defaultdict(float)
    rows = (GpuHour.objects.filter(gpu__node__cluster=cluster, hour__gte=start, hour__lt=end,
                                   allocated_gpu_s__gt=0)
            .values_list("tenant_id", "hour").annotate(s=Sum("allocated_gpu_s")))
    for tenant, hour, seconds in rows:
        agents[(tenant, day_of(hour))] += seconds / 3600
    attributor = Attributor(Rule(*row) for row in AttributionRule.objects.filter(
        cluster=cluster).values_list("tenant_id", "field", "value", "priority", "cluster_id"))
    slurm: dict[tuple[int | None, date], float] = defaultdict(float)
    for account, user, hour, gpu_s in SlurmHour.objects.filter(
            cluster=cluster, hour__gte=start, hour__lt=end).values_list(
            "account", "user", "hour", "gpu_s"):
        tenant = attributor.tenant_for({"account": account, "user": user}, "", cluster.pk, None)
        slurm[(tenant, day_of(hour))] += gpu_s / 3600
    keys = sorted(set(agents) | set(slurm), key=lambda k: (k[0] is None, k[0] or 0, k[1]))
    return [DayCheck(cluster.name, tenant, day, round(agents.get((tenant, day), 0.0), 6),
                     round(slurm.get((tenant, day), 0.0), 6))
            for tenant, day in keys if tenant_id is None or tenant == tenant_id]


def recent_checks(now: datetime, zone: ZoneInfo, *, days: int = 7,
                  tenant_id: int | None = None) -> list[DayCheck]:
    """The last `days` local days (today's so far included) of every cluster with Slurm
    accounting, for one tenant or all."""
    start = datetime.combine(now.astimezone(zone).date(), datetime.min.time(), tzinfo=zone)
    start = (start - timedelta(days=days - 1)).astimezone(UTC)
    return [check for cluster in slurm_clusters()
            for check in reconcile(cluster, start, now, zone, tenant_id)]


def has_history(tenant_id: int) -> bool:
    """Whether Slurm accounting has been imported for a cluster where the tenant has an
    account or user rule (the advice may then read it)."""
    return SlurmHour.objects.filter(cluster__rules__tenant_id=tenant_id,
                                    cluster__rules__field__in=("account", "user")).exists()


def tenant_hours(tenant_id: int, end: datetime) -> tuple[datetime | None, list[float]]:
    """GPUs a tenant held each hour by Slurm's accounting (every cluster's, attributed by its
    account and user rules), from its first hour with usage to the last whole hour before
    `end`; an hour no job of it covered is idle (accounting misses no job). (None, []) when it
    has none: the history the first-commitment advice reads for a tenant with no contract."""
    end = floor_hour(end)
    by_hour: dict[datetime, float] = defaultdict(float)
    for cluster in slurm_clusters():
        rules = AttributionRule.objects.filter(cluster=cluster).values_list(
            "tenant_id", "field", "value", "priority", "cluster_id")
        attributor = Attributor(Rule(*row) for row in rules)
        for account, user, hour, gpu_s in SlurmHour.objects.filter(
                cluster=cluster, hour__lt=end).values_list("account", "user", "hour", "gpu_s"):
            if attributor.tenant_for({"account": account, "user": user}, "", cluster.pk,
                                     None) == tenant_id:
                by_hour[hour] += gpu_s / 3600
    if not by_hour:
        return None, []
    first = min(by_hour)
    count = int((end - first).total_seconds() // 3600)
    return first, [round(by_hour.get(first + timedelta(hours=k), 0.0), 6) for k in range(count)]


def _day_finder(days: list[tuple[date, datetime]]):
    firsts = [first for _day, first in days]

    def day_of(hour: datetime) -> date:
        return days[max(0, bisect.bisect_right(firsts, hour) - 1)][0]

    return day_of
