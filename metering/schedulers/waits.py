"""Keeping what each scheduler says of the jobs that waited for GPUs (metering.models.JobWait),
whatever the scheduler: Slurm's accounting pass and the Kubernetes lister hand their readings
here as `Seen`, in the scheduler's own words turned into one shape.

A job is one row keyed by its cluster, scheduler and key: read again, it is updated in place
(a job pending at one pass has started or ended by the next), never counted twice. Each is
attributed to a tenant by the cluster's attribution rules at every reading, as samples are
(account, user and namespace; a wait has no node). A finished job that never waited for room
is not kept (nearly every job starts a scheduler cycle after it became eligible); one already
kept is updated, since its last reason decides. Schedulers say why a job waits only while it
waits (Slurm's Reason reads "None" once it has started): a reading with no reason keeps the
last one read.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from metering.attribution import Attributor, Rule
from metering.models import AttributionRule, Cluster, JobWait


@dataclass(frozen=True)
class Seen:
    """A job as a scheduler recorded it, in one shape for every scheduler."""

    key: str  # Slurm's job id, a Kubernetes object's uid
    name: str  # as people name it
    gpus: int
    submitted: datetime
    eligible: datetime | None
    started: datetime | None
    ended: datetime | None
    reason: str  # the scheduler's own last reason
    capacity: bool  # whether that reason is "no room" (the scheduler's reader decides)
    account: str = ""
    user: str = ""
    namespace: str = ""
    gpu_type: str = ""
    state: str = ""
    qos: str = ""
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.started is not None or self.ended is not None


@dataclass(frozen=True)
class Stored:
    read: int
    new: int
    updated: int


FIELDS = ("name", "account", "user", "namespace", "gpus", "gpu_type", "submitted", "eligible",
          "started", "ended", "state", "reason", "capacity", "qos", "message")
MAX_MESSAGE = 2000  # a scheduler's message is evidence, not a log
NO_REASON = frozenset({"", "None"})  # what a scheduler says of a job that no longer waits


def attributor(cluster: Cluster) -> Attributor:
    return Attributor(Rule(*row) for row in AttributionRule.objects.filter(
        cluster=cluster).exclude(field="node").values_list(
        "tenant_id", "field", "value", "priority", "cluster_id"))


def store(cluster: Cluster, scheduler: str, seen: list[Seen], now: datetime) -> Stored:
    """Keep `seen` for `cluster`: new waits added, known ones brought up to date."""
    rules = attributor(cluster)
    known = {w.key: w for w in JobWait.objects.filter(
        cluster=cluster, scheduler=scheduler, key__in=[s.key for s in seen])}
    new, changed = [], []
    for job in seen:
        tenant = rules.tenant_for({"account": job.account, "user": job.user,
                                   "namespace": job.namespace}, "", cluster.pk, None)
        values = {name: getattr(job, name) for name in FIELDS}
        values["message"] = values["message"][:MAX_MESSAGE]
        row = known.get(job.key)
        if row is not None and job.reason in NO_REASON and row.reason not in NO_REASON:
            values["reason"], values["capacity"] = row.reason, row.capacity
        if row is None:
            if job.finished and not job.capacity:
                continue
            new.append(JobWait(cluster=cluster, scheduler=scheduler, key=job.key,
                               tenant_id=tenant, seen_at=now, updated_at=now, **values))
            continue
        if tenant == row.tenant_id and all(getattr(row, k) == v for k, v in values.items()):
            continue
        for name, value in values.items():
            setattr(row, name, value)
        row.tenant_id, row.updated_at = tenant, now
        changed.append(row)
    with transaction.atomic():
        JobWait.objects.bulk_create(new, batch_size=1000)
        JobWait.objects.bulk_update(changed, [*FIELDS, "tenant", "updated_at"], batch_size=1000)
    return Stored(len(seen), len(new), len(changed))


def still_waiting(cluster: Cluster, scheduler: str) -> list[JobWait]:
    """The jobs of the cluster kept as waiting (neither started nor ended)."""
    return list(JobWait.objects.filter(cluster=cluster, scheduler=scheduler,
                                       started__isnull=True, ended__isnull=True))
