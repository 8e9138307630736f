"""The Celery application: configured from Django settings (CELERY_*), tasks found in the apps.

The beat schedule lives here, in one place, as the jobs arrive.
"""

import os

from celery import Celery, signals
from celery.schedules import crontab
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from core import audit, metrics  # noqa: E402  (after the settings module is named)

app = Celery("gpuloans")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.beat_schedule = {
    "purge-old-samples": {"task": "metering.tasks.purge_old_samples",
                          "schedule": crontab(minute=17, hour=3)},
    "refresh-peaks": {"task": "metering.tasks.refresh_peaks", "schedule": 60.0},
    # Both do nothing unless SLURM_CLUSTER (and SLURM_APPLY_QUOTAS) are set.
    "import-slurm-usage": {"task": "metering.tasks.import_slurm_usage", "schedule": 900.0},
    "apply-slurm-limits": {"task": "loans.tasks.apply_slurm_limits", "schedule": 300.0},
    "close-periods": {"task": "loans.tasks.close_periods", "schedule": crontab(minute=7)},
    "check-alerts": {"task": "loans.tasks.check_alerts", "schedule": 300.0},
    "grant-bursts": {"task": "loans.tasks.grant_bursts", "schedule": 60.0},
    "note-holds": {"task": "loans.tasks.note_holds", "schedule": 60.0},
    # Does nothing unless LDAP_SERVER_URI is set.
    "sync-directory": {"task": "loans.tasks.sync_directory", "schedule": crontab(minute=27)},
    "flush-outbox": {"task": "loans.tasks.flush_outbox", "schedule": 60.0},
    "deliver-notices": {"task": "loans.tasks.deliver_notices", "schedule": 60.0},
    "write-digests": {"task": "loans.tasks.write_digests", "schedule": crontab(minute=3)},
    "recommend": {"task": "loans.tasks.recommend", "schedule": crontab(minute=37, hour=2)},
    # Just after UTC midnight: it also pools the day's forecast band before the pages ask.
    "measure-band-coverage": {"task": "loans.tasks.measure_band_coverage",
                              "schedule": crontab(minute=5, hour=0)},
    "purge-kept-files": {"task": "loans.tasks.purge_kept_files",
                         "schedule": crontab(minute=47)},
}


@app.on_after_configure.connect
def _from_settings(sender, **_kwargs) -> None:
    """Entries whose period is a setting, read once the settings are (not while this module is
    imported: a settings module that imports config.settings would be read half-built)."""
    # Kubernetes clusters with an API address: their Workloads or pods, for the floor.
    sender.conf.beat_schedule["list-kubernetes"] = {
        "task": "metering.tasks.list_kubernetes",
        "schedule": float(settings.KUBERNETES_LIST_SECONDS)}


@signals.task_success.connect
def _succeeded(sender=None, **_kwargs) -> None:
    metrics.job_runs.labels(sender.name, "success").inc()


@signals.task_failure.connect
def _failed(sender=None, **_kwargs) -> None:
    metrics.job_runs.labels(sender.name, "failure").inc()


@signals.task_retry.connect
def _retried(sender=None, **_kwargs) -> None:
    metrics.job_runs.labels(sender.name, "retry").inc()


# A task's writes are the job's in the audit log (core.audit), whoever queued it.
_acting: dict[str, object] = {}


@signals.task_prerun.connect
def _acting_as_job(task_id=None, task=None, **_kwargs) -> None:
    context = audit.acting(job=f"task {task.name}")
    context.__enter__()
    _acting[task_id] = context


@signals.task_postrun.connect
def _done_acting(task_id=None, **_kwargs) -> None:
    context = _acting.pop(task_id, None)
    if context is not None:
        context.__exit__(None, None, None)
