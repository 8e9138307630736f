"""Slurm accounting as a second meter: the jobs `sacct` reports (from slurmdbd), each job's
allocated GPUs over its run time as GPU-seconds per account, user and hour, kept per cluster
beside the agents' meter (metering.models.SlurmJob, SlurmHour).

An import is idempotent: a job is one row keyed by its cluster and id, so reading it again
changes nothing, and a job that was running (counted up to the import's moment) and has ended
since is completed in place, never counted twice. The hours an import touched are rebuilt from
the jobs that cover them.

`sacct --json` is read where Slurm has it (21.08 and later), else `sacct -P` with the columns
JobID, Account, User, Start, End, AllocTRES and State; times are asked for in UTC.
"""

import json
import os
import subprocess
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction

from metering.models import Cluster, SlurmHour, SlurmJob
from metering.rollups import HOUR, floor_hour

FIELDS = ("JobID", "Account", "User", "Start", "End", "AllocTRES", "State")
TIMEOUT_S = 300


class AccountingError(Exception):
    """sacct could not be run or its answer not read."""


@dataclass(frozen=True)
class Job:
    job: str
    account: str
    user: str
    gpus: int
    start: datetime
    end: datetime | None  # None while it runs
    state: str


def gpus_of(tres: str) -> int:
    """The GPUs of an AllocTRES ("cpu=1,gres/gpu=2,node=1"): gres/gpu, or the sum of its typed
    counts (gres/gpu:h100=2) where the total is not listed."""
    counts = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
    if "gres/gpu" in counts:
        return int(counts["gres/gpu"])
    return sum(int(n) for key, n in counts.items() if key.startswith("gres/gpu:"))


def _moment(text: str) -> datetime | None:
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC)  # asked for in UTC (TZ=UTC)


def read_parsable(text: str) -> list[Job]:
    """Jobs of `sacct -X -P -n -o JobID,Account,User,Start,End,AllocTRES,State` that held GPUs
    and started."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != len(FIELDS):
            continue
        job, account, user, start, end, tres, state = fields
        begun = _moment(start)
        gpus = gpus_of(tres)
        if begun is None or gpus <= 0:
            continue
        jobs.append(Job(job, account, user, gpus, begun, _moment(end),
                        state.split()[0] if state else ""))
    return jobs


def read_json(text: str) -> list[Job]:
    """Jobs of `sacct -X --json` (its OpenAPI shapes as of v0.0.38) that held GPUs and
    started."""
    jobs = []
    for raw in json.loads(text).get("jobs", []):
        times = raw.get("time", {})
        start, end = times.get("start") or 0, times.get("end") or 0
        allocated = (raw.get("tres") or {}).get("allocated") or []
        gpu = [t.get("count") or 0 for t in allocated
               if t.get("type") == "gres" and t.get("name") == "gpu"]
        gpus = gpu[0] if gpu else sum(
            t.get("count") or 0 for t in allocated
            if t.get("type") == "gres" and str(t.get("name") or "").startswith("gpu:"))
        if not start or gpus <= 0:
            continue
        state = raw.get("state", "")
        array = raw.get("array") or {}
        job = (f"{array['job_id']}_{array['task_id']}"
               if array.get("job_id") and array.get("task_id") is not None
               else str(raw["job_id"]))
        jobs.append(Job(job, raw.get("account") or "", raw.get("user") or "", int(gpus),
                        datetime.fromtimestamp(start, UTC),
                        datetime.fromtimestamp(end, UTC) if end else None,
                        state.get("current", "") if isinstance(state, dict) else str(state)))
    return jobs


Run = Callable[[list[str]], subprocess.CompletedProcess]


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,  # noqa: S603
                          env={**os.environ, "TZ": "UTC"})


def sacct(since: datetime, until: datetime, run: Run = _run) -> list[Job]:
    """Every job's allocation that ran in [since, until), from `sacct`."""
    window = ["-X", "-a", "-S", f"{since.astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
              "-E", f"{until.astimezone(UTC):%Y-%m-%dT%H:%M:%S}"]
    try:
        done = run(["sacct", *window, "--json"])
        if done.returncode == 0:
            try:
                return read_json(done.stdout)
            except (ValueError, KeyError, TypeError, AttributeError):
                pass  # not the JSON this reads: the plain columns say the same
        done = run(["sacct", *window, "-P", "-n", "-o", ",".join(FIELDS)])
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AccountingError(f"sacct: {error}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise AccountingError(f"sacct failed: {said[-1] if said else done.returncode}")
    return read_parsable(done.stdout)


def hours_of(start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """[start, end) as (UTC hour, seconds in it)."""
    out, hour = [], floor_hour(start)
    while hour < end:
        seconds = (min(end, hour + HOUR) - max(start, hour)).total_seconds()
        if seconds > 0:
            out.append((hour, seconds))
        hour += HOUR
    return out


@dataclass(frozen=True)
class Imported:
    read: int  # jobs sacct reported that held GPUs
    new: int
    completed: int  # were running at the last import, have ended since
    hours: int  # account-hours rebuilt


def import_jobs(cluster: Cluster, jobs: list[Job], now: datetime) -> Imported:
    """Store `jobs` for `cluster` and rebuild the hours they cover (running ones up to
    `now`)."""
    stored = {j.job: j for j in SlurmJob.objects.filter(cluster=cluster,
                                                       job__in=[j.job for j in jobs])}
    touched, new, completed = [], 0, 0
    with transaction.atomic():
        for job in jobs:
            row = stored.get(job.job)
            if row is None:
                new += 1
            elif row.end is None and job.end is not None:
                completed += 1
            elif (row.end, row.gpus, row.start) == (job.end, job.gpus, job.start) and job.end:
                continue  # read again, unchanged: nothing to do
            SlurmJob.objects.update_or_create(cluster=cluster, job=job.job, defaults={
                "account": job.account, "user": job.user, "gpus": job.gpus,
                "start": job.start, "end": job.end, "state": job.state, "imported_at": now})
            touched.append((job.start, job.end or now))
            if row is not None:  # its earlier span too, should Slurm have corrected it
                touched.append((row.start, row.end or row.imported_at))
        hours = _rebuild(cluster, touched, now) if touched else 0
    return Imported(len(jobs), new, completed, hours)


def _rebuild(cluster: Cluster, spans: list[tuple[datetime, datetime]], now: datetime) -> int:
    low = floor_hour(min(start for start, _end in spans))
    high = floor_hour(max(end for _start, end in spans)) + HOUR
    sums: dict[tuple[str, str, datetime], float] = defaultdict(float)
    covering = SlurmJob.objects.filter(cluster=cluster, start__lt=high).exclude(end__lte=low)
    for job in covering:
        for hour, seconds in hours_of(max(job.start, low), min(job.end or now, high)):
            sums[(job.account, job.user, hour)] += seconds * job.gpus
    SlurmHour.objects.filter(cluster=cluster, hour__gte=low, hour__lt=high).delete()
    SlurmHour.objects.bulk_create(
        SlurmHour(cluster=cluster, account=account, user=user, hour=hour, gpu_s=gpu_s)
        for (account, user, hour), gpu_s in sums.items())
    return len(sums)


def since_default(cluster: Cluster, now: datetime, days: int) -> datetime:
    """Where an import starts when not told: at the oldest job still running at the last import
    (to complete it), else a little before the last import, else `days` back."""
    running = SlurmJob.objects.filter(cluster=cluster, end__isnull=True).order_by("start").first()
    if running is not None:
        return running.start
    last = SlurmJob.objects.filter(cluster=cluster).order_by("-imported_at").first()
    if last is not None:
        return last.imported_at - timedelta(hours=1)
    return now - timedelta(days=days)


def import_usage(cluster: Cluster, *, now: datetime, since: datetime | None = None,
                 days: int = 35, run: Run = _run) -> Imported:
    """Read `sacct` since `since` (or since_default) and import what it says."""
    since = since or since_default(cluster, now, days)
    return import_jobs(cluster, sacct(since, now, run), now)
