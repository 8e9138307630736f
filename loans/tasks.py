"""The loans jobs: thin adapters that take ids and call a service (scheduled in config/celery.py;
each is also a management command)."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from loans import schedulers
from loans.services import bursts
from loans.services.advice import kept_files
from loans.services.advice.standalone import refresh_recommendations
from loans.services.alerts import delivery, digest, notices, notify
from loans.services.alerts.conditions import evaluate_alerts
from loans.services.guarantee import holds
from loans.services.ledger import forecasting
from loans.services.ledger.closing import close_due_periods
from metering.usage.slurm import find_slurm_cluster

RETRY = {"autoretry_for": (Exception,), "retry_backoff": True, "max_retries": 5}


@shared_task(**RETRY)
def close_periods() -> str:
    """Write the statements that are due (hourly, from beat). Each statement is written in
    one transaction, so a failed run leaves none half-written and the retry resumes. Each
    tenant's leads are sent their new statements with the PDF (their choice)."""
    now = timezone.now()
    run = close_due_periods(now)
    notices.for_statements(run.written, now)
    return f"{len(run.written)} statements written over {run.contracts} contracts"


@shared_task(**RETRY)
def check_alerts() -> str:
    """Open and resolve alerts (every five minutes, from beat)."""
    run = evaluate_alerts(timezone.now())
    return f"{len(run.opened)} opened, {len(run.resolved)} resolved"


@shared_task(**RETRY)
def recommend() -> str:
    """Refresh every active contract's recommendations (daily, from beat)."""
    run = refresh_recommendations(timezone.now())
    return (f"{run.created} created, {run.updated} updated, {run.superseded} superseded over "
            f"{run.contracts} contracts")


@shared_task(**RETRY)
def grant_bursts() -> str:
    """Grant queued burst requests that fit now (every minute, from beat)."""
    run = bursts.process_queue(timezone.now())
    return f"{run.granted} granted, {run.expired} expired"


@shared_task(**RETRY)
def note_holds() -> str:
    """Open and close gpuloans' own holds of contracts, which the floor does not count (every
    minute, from beat)."""
    noted = holds.note(timezone.now())
    return f"{noted.opened} holds opened, {noted.closed} closed"


@shared_task(**RETRY)
def sync_directory() -> str:
    """The LDAP directory's people and groups read again (hourly, from beat): memberships
    follow the groups, people the directory no longer holds are deactivated with their tokens.
    Nothing to do unless LDAP_SERVER_URI is set."""
    if not settings.LDAP_SERVER_URI:
        return "LDAP is not configured"
    from loans.services.identity import ldap as directory_ldap  # noqa: PLC0415 - needs python-ldap

    done = directory_ldap.sync(timezone.now())
    return (f"{done.people} people read, {done.changed} with changed memberships, "
            f"{done.forgotten} no longer in the directory")


@shared_task(**RETRY)
def purge_kept_files() -> str:
    """Delete the advice files refused forms kept past their hour (hourly, from beat)."""
    return f"{kept_files.purge()} kept files deleted"


@shared_task
def flush_outbox() -> str:
    """Queue the jobs that waited for the broker (every minute, from beat)."""
    queued, waiting = notify.flush_outbox()
    return f"{queued} queued, {waiting} still waiting"


@shared_task
def deliver_notices() -> str:
    """Send the notices due: alerts to people and channels, statements, digests (every minute,
    from beat, and as soon as a new notice commits). A notice that fails waits its turn."""
    sent, failed = delivery.deliver_due(timezone.now())
    return f"{sent} sent, {failed} failed"


@shared_task(**RETRY)
def write_digests() -> str:
    """Write the daily and weekly digests once their hour has come (hourly, from beat); a
    digest already written that day is not written again."""
    return f"{digest.write_due(timezone.now())} digests written"


# Receivers may be down for a while: back off up to an hour between tries, for about a day.
@shared_task(autoretry_for=(notify.DeliveryError,), retry_backoff=30, retry_backoff_max=3600,
             max_retries=30)
def deliver_webhook(url: str, body: dict) -> int:
    return notify.post_webhook(url, body)


@shared_task(autoretry_for=(OSError,), retry_backoff=30, retry_backoff_max=3600, max_retries=30)
def send_email(recipients: list[str], subject: str, text: str) -> int:
    return notify.email(recipients, subject, text)


@shared_task(**RETRY)
def apply_slurm_limits() -> str:
    """Contracts and bursts into Slurm's limits (every 5 minutes, from beat) where
    SLURM_APPLY_QUOTAS is on for the cluster SLURM_CLUSTER names (manage.py apply_quotas
    --slurm by hand)."""
    if not (settings.SLURM_APPLY_QUOTAS and settings.SLURM_CLUSTER):
        return "SLURM_APPLY_QUOTAS or SLURM_CLUSTER is not set"
    cluster = find_slurm_cluster(settings.SLURM_CLUSTER)
    changes = schedulers.for_kind("slurm").apply(cluster.pk, cluster.name, at=timezone.now(),
                                                 dry_run=False)
    return f"{len(changes)} changes"


@shared_task(**RETRY)
def measure_band_coverage() -> str:
    """Measure how often the burn-down's band held on the fleet's last weeks (daily, from
    beat), for the pages to state."""
    measured = forecasting.measure_coverage(timezone.now())
    return ", ".join(f"{bucket} days left: {found.inside} of {found.forecasts} inside"
                     for bucket, found in measured.items())
