from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from metering import partitions, peaks, schedulers
from metering.models import Cluster
from metering.recount import rebuild_rollups
from metering.retention import purge_raw_samples
from metering.schedulers.kubernetes import lister
from metering.schedulers.slurm.sacct import AccountingError


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def recount_rollups(start: str, end: str) -> int:
    """Rebuild the hourly rollups of [start, end) from raw samples (ISO 8601 bounds). On
    demand, never scheduled: `manage.py recount_rollups` in the background, for an operator who
    would rather not hold a shell (`celery -A config call metering.tasks.recount_rollups
    --args '["2026-11-01T00:00+00:00", "2026-11-02T00:00+00:00"]'`)."""
    return rebuild_rollups(datetime.fromisoformat(start), datetime.fromisoformat(end)).samples


@shared_task
def refresh_peaks() -> int:
    """Recount the stale tenant-hour peaks from the raw samples (every minute, from beat)."""
    return peaks.refresh()


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def purge_old_samples() -> str:
    """Drop raw samples past the retention window, and settle yesterday's partition (daily,
    from beat)."""
    now = timezone.now()
    purged = purge_raw_samples(now)
    settled = partitions.settle((now - timedelta(days=1)).astimezone(UTC).date())
    return (f"cutoff {purged.cutoff:%Y-%m-%d %H:%M}, {purged.partitions_dropped} partitions, "
            f"yesterday's {'settled' if settled else 'absent'}")


@shared_task(autoretry_for=(AccountingError,), retry_backoff=True, max_retries=3)
def import_slurm_usage() -> str:
    """Slurm accounting into the second meter (every 15 minutes, from beat) where
    SLURM_CLUSTER names the cluster; `manage.py import_slurm_usage` does the same by hand."""
    if not settings.SLURM_CLUSTER:
        return "SLURM_CLUSTER is not set"
    cluster = Cluster.objects.get(name=settings.SLURM_CLUSTER)
    scheduler = schedulers.for_cluster(cluster)
    if scheduler is None:
        return f"cluster {cluster.name} ({cluster.kind}) keeps no accounting to import"
    done = scheduler.import_usage(cluster, now=timezone.now(), days=settings.SLURM_IMPORT_DAYS)
    return f"{done.read} jobs read, {done.new} new, {done.completed} completed"


@shared_task
def list_kubernetes() -> str:
    """Every Kubernetes cluster's waiting work, read from its API (every minute, from beat);
    one cluster that cannot be read does not stop the others. `manage.py list_kubernetes`
    does the same by hand."""
    said = []
    for cluster in lister.clusters():
        try:
            done = lister.list_once(cluster, now=timezone.now())
        except lister.KubernetesError as error:
            said.append(str(error))
            continue
        said.append(f"{cluster.name}: {done.read} read, {done.stored.new} new, "
                    f"{done.stored.updated} updated, {done.gone} gone")
    return "; ".join(said) or "no Kubernetes cluster has an API address"
