"""Queueing a job by its task name, or keeping it in the database (PendingTask) while the
broker cannot take it, and queueing what waited once the broker is back."""

import logging

from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

from loans.models import PendingTask

log = logging.getLogger(__name__)


def enqueue(name: str, *args) -> bool:
    """Queue the job by its task name, or keep it in the outbox when the broker cannot take
    it now. By name: a service does not import the tasks that call services. A signature
    sends by name where the task module is not loaded (the web process), and runs it as the
    task where it is (a worker, or eager tests)."""
    try:
        current_app.signature(name, args=args).apply_async(retry=False)
    except (BrokerError, OSError) as error:
        log.warning("broker unavailable, %s waits in the outbox: %s", name, error)
        PendingTask.objects.create(task=name, args=list(args), last_error=str(error)[:500])
        return False
    return True


def flush_outbox() -> tuple[int, int]:
    """Queue the jobs waiting for the broker, oldest first; stops at the first the broker
    refuses. Returns how many were queued and how many still wait. Each job is locked while
    it is queued, so two runs at once (a slow one and the next minute's) never queue it twice."""
    queued = 0
    while True:
        with transaction.atomic():
            pending = (PendingTask.objects.select_for_update(skip_locked=True)
                       .order_by("pk").first())
            if pending is None:
                break
            try:
                current_app.send_task(pending.task, args=pending.args, retry=False)
            except (BrokerError, OSError) as error:
                PendingTask.objects.filter(pk=pending.pk).update(
                    attempts=pending.attempts + 1, last_error=str(error)[:500])
                break
            pending.delete()
            queued += 1
    return queued, PendingTask.objects.count()
