"""Telling people about alerts and burst requests: e-mail to the tenant's addresses (the
operators' for events no tenant owns) and a JSON POST to the tenant's webhook. Both are Celery
tasks, queued after the event commits and retried with backoff, so a mail server or receiver
that is down delays a notification and loses none. A broker that is down does not fail the
request either: the job waits in the database (PendingTask) until flush_outbox queues it."""

import logging

from celery import current_app
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

from loans.models import Alert, PendingTask
from loans.services.alerts import webhooks
from loans.services.alerts.webhooks import DeliveryError  # noqa: F401 - the tasks retry on it

log = logging.getLogger(__name__)
SEND_EMAIL, DELIVER_WEBHOOK = "loans.tasks.send_email", "loans.tasks.deliver_webhook"


def payload(alert: Alert, event: str) -> dict:
    return {
        "event": event,
        "alert": {
            "id": alert.pk, "kind": alert.kind, "subject": alert.subject,
            "tenant": alert.tenant.slug if alert.tenant else None, "state": alert.state,
            "message": alert.message, "details": alert.details,
            "opened_at": alert.opened_at.isoformat(),
            "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
        },
    }


def notify_later(tenant, subject: str, text: str, body: dict) -> None:
    """Queue the notifications the tenant chose (the operators' addresses where no tenant
    owns the event), to leave once the current transaction commits."""
    recipients = tenant.alert_recipients() if tenant else list(settings.ALERT_EMAILS)
    if recipients:
        transaction.on_commit(lambda: enqueue(SEND_EMAIL, recipients, subject, text))
    if tenant and tenant.webhook_url:
        url = tenant.webhook_url
        transaction.on_commit(lambda: enqueue(DELIVER_WEBHOOK, url, body))


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


def notify_alert(alert: Alert, event: str) -> None:
    tenant = alert.tenant
    state = "resolved" if event == "resolved" else alert.get_kind_display()
    subject = f"[gpuloans] {tenant.name if tenant else 'fleet'}: {state}"
    notify_later(tenant, subject, f"{alert.message}\n\n{alert.subject}", payload(alert, event))


def email(recipients: list[str], subject: str, text: str) -> int:
    return send_mail(subject, text, None, recipients)


def post_webhook(url: str, body: dict) -> int:
    """POST the body as JSON to a public address (services.webhooks), or DeliveryError."""
    return webhooks.post(url, body)
