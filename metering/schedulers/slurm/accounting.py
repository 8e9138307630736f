"""Slurm accounting as a second meter: the jobs `sacct` reports (from slurmdbd), each job's
allocated GPUs over its run time as GPU-seconds per account, user and hour, kept per cluster
beside the agents' meter (metering.models.SlurmJob, SlurmHour).

An import is idempotent: a job is one row keyed by its cluster and id, so reading it again
changes nothing, and a job that was running (counted up to the import's moment) and has ended
since is completed in place, never counted twice. The hours an import touched are rebuilt from
the jobs that cover them; samples the agents stored as an ended job's past its End are its no
more (metering.services.end_jobs).

The same sacct answer gives the jobs that waited for GPUs (Submit, Eligible, Start, End,
Reason, QOS and the GPUs asked), kept as the floor's waits (metering.schedulers.waits), and an
import starts early enough to see a job still waiting at the last one start or end.

sacct is read, and jobs spread over hours, by metering.schedulers.slurm.sacct.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from metering.models import Cluster, JobWait, SlurmHour, SlurmJob
from metering.rollups import HOUR, floor_hour
from metering.schedulers import waits
from metering.schedulers.slurm.sacct import (
    AccountingError,
    Job,
    Run,
    Waited,
    run_sacct,
    sacct_all,
    spread_seconds,
)
from metering.services import end_jobs


@dataclass(frozen=True)
class Imported:
    read: int  # jobs sacct reported that held GPUs
    new: int
    completed: int  # were running at the last import, have ended since
    hours: int  # account-hours rebuilt
    waited: waits.Stored | None = None  # the jobs that waited for GPUs


def import_jobs(cluster: Cluster, jobs: list[Job], now: datetime) -> Imported:
    """Store `jobs` for `cluster` and rebuild the hours they cover (running ones up to
    `now`)."""
    stored = {j.job: j for j in SlurmJob.objects.filter(cluster=cluster,
                                                       job__in=[j.job for j in jobs])}
    touched, created, changed, completed = [], {}, [], 0
    ends: dict[str, datetime] = {}  # jobs seen ended for the first time
    for job in jobs:
        row = stored.get(job.job)
        if row is not None and job.end and (row.end, row.gpus, row.start) == (
                job.end, job.gpus, job.start):
            continue  # read again, unchanged: nothing to do
        fields = {"account": job.account, "user": job.user, "gpus": job.gpus,
                  "start": job.start, "end": job.end, "state": job.state, "imported_at": now}
        if row is None:
            # sacct reports a job once; should it repeat one, the last reading stands.
            created[job.job] = SlurmJob(cluster=cluster, job=job.job, **fields)
        else:
            if row.end is None and job.end is not None:
                completed += 1
            # its earlier span too, should Slurm have corrected it
            touched.append((row.start, row.end or row.imported_at))
            for name, value in fields.items():
                setattr(row, name, value)
            changed.append(row)
        touched.append((job.start, job.end or now))
        if job.end is not None:
            ends[job.job] = job.end
    with transaction.atomic():
        # One statement a thousand rows, not one a job: a month of a large cluster is
        # 100,000 jobs (bench/accounting.py).
        SlurmJob.objects.bulk_create(created.values(), batch_size=1000)
        SlurmJob.objects.bulk_update(changed, list(_FIELDS), batch_size=1000)
        hours = _rebuild(cluster, touched, now) if touched else 0
        # What the agents still counted for an ended job (a record whose epilog never ran)
        # is the job's no more from its End.
        end_jobs(cluster.pk, ends)
    return Imported(len(jobs), len(created), completed, hours)


_FIELDS = ("account", "user", "gpus", "start", "end", "state", "imported_at")


def _rebuild(cluster: Cluster, spans: list[tuple[datetime, datetime]], now: datetime) -> int:
    low = floor_hour(min(start for start, _end in spans))
    high = floor_hour(max(end for _start, end in spans)) + HOUR
    count = int((high - low) / HOUR)
    held: dict[tuple[str, str], list] = defaultdict(list)  # (account, user) -> jobs
    covering = SlurmJob.objects.filter(cluster=cluster, start__lt=high).exclude(end__lte=low)
    for job in covering:
        held[(job.account, job.user)].append(
            (max(job.start, low), min(job.end or now, high), job.gpus))
    rows = [SlurmHour(cluster=cluster, account=account, user=user, hour=low + k * HOUR,
                      gpu_s=gpu_s)
            for (account, user), jobs in held.items()
            for k, gpu_s in enumerate(spread_seconds(low, count, jobs)) if gpu_s > 0]
    SlurmHour.objects.filter(cluster=cluster, hour__gte=low, hour__lt=high).delete()
    SlurmHour.objects.bulk_create(rows)
    return len(rows)


def since_default(cluster: Cluster, now: datetime, days: int) -> datetime:
    """Where an import starts when not told: at the oldest job still running, or still
    waiting, at the last import (to complete it), else a little before the last import, else
    `days` back."""
    starts = []
    running = SlurmJob.objects.filter(cluster=cluster, end__isnull=True).order_by("start").first()
    if running is not None:
        starts.append(running.start)
    waiting = JobWait.objects.filter(cluster=cluster, scheduler=JobWait.Scheduler.SLURM,
                                     started__isnull=True, ended__isnull=True
                                     ).order_by("submitted").first()
    if waiting is not None:
        starts.append(waiting.submitted)
    if starts:
        return min(starts)
    last = SlurmJob.objects.filter(cluster=cluster).order_by("-imported_at").first()
    if last is not None:
        return last.imported_at - timedelta(hours=1)
    return now - timedelta(days=days)


def seen(job: Waited, now: datetime) -> waits.Seen:
    """A Slurm job that waited, as the floor's store keeps it; one whose accounting names no
    reason waited for room past SLURM_WAIT_GRACE_SECONDS (metering.schedulers.slurm.sacct)."""
    grace = timedelta(seconds=settings.SLURM_WAIT_GRACE_SECONDS)
    return waits.Seen(key=job.job, name=job.job, gpus=job.gpus, submitted=job.submit,
                      eligible=job.eligible, started=job.start, ended=job.end,
                      reason=job.reason, capacity=job.capacity(grace, now), account=job.account,
                      user=job.user, gpu_type=job.gpu_type, state=job.state, qos=job.qos)


def import_usage(cluster: Cluster, *, now: datetime, since: datetime | None = None,
                 days: int = 35, run: Run = run_sacct) -> Imported:
    """Read `sacct` since `since` (or since_default) and import what it says: the jobs that
    held GPUs, and those that waited for them."""
    since = since or since_default(cluster, now, days)
    read = sacct_all(since, now, run)
    imported = import_jobs(cluster, read.jobs, now)
    stored = waits.store(cluster, JobWait.Scheduler.SLURM, [seen(w, now) for w in read.waited], now)
    return Imported(imported.read, imported.new, imported.completed, imported.hours, stored)


class Slurm:
    """The Slurm scheduler (metering.schedulers.Scheduler)."""

    kind = "slurm"
    errors = (AccountingError,)

    def import_usage(self, cluster: Cluster, *, now: datetime, since: datetime | None = None,
                     days: int = 35) -> Imported:
        return import_usage(cluster, now=now, since=since, days=days)
