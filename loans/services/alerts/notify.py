"""Telling people about alerts and burst requests: e-mail to the tenant's addresses (the
operators' for events no tenant owns) and a JSON POST to the tenant's webhook; each lead
(or operator) and chat channel through the notices' outbox (loans.services.alerts.notices).
The first two are Celery tasks, queued after the event commits and retried with backoff, so
a mail server or receiver that is down delays a notification and loses none. A broker that is
down does not fail the request either: the job waits in the database (PendingTask) until
flush_outbox queues it (loans.services.alerts.outbox)."""

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from loans.models import Alert
from loans.services.alerts import notices, webhooks
from loans.services.alerts.outbox import enqueue, flush_outbox  # noqa: F401 - the tasks call it
from loans.services.alerts.webhooks import DeliveryError  # noqa: F401 - the tasks retry on it

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


def notify_later(tenant, subject: str, text: str, body: dict,
                 leave_out: frozenset[str] = frozenset()) -> None:
    """Queue the notifications the tenant chose (the operators' addresses where no tenant
    owns the event), to leave once the current transaction commits; `leave_out`: addresses
    whose people are told by their own choices (loans.services.alerts.notices)."""
    recipients = tenant.alert_recipients() if tenant else list(settings.ALERT_EMAILS)
    recipients = [r for r in recipients if r.lower() not in leave_out]
    if recipients:
        transaction.on_commit(lambda: enqueue(SEND_EMAIL, recipients, subject, text))
    if tenant and tenant.webhook_url:
        url = tenant.webhook_url
        transaction.on_commit(lambda: enqueue(DELIVER_WEBHOOK, url, body))


def notify_alert(alert: Alert, event: str) -> None:
    tenant = alert.tenant
    state = "resolved" if event == "resolved" else alert.get_kind_display()
    subject = f"[gpuloans] {tenant.name if tenant else 'fleet'}: {state}"
    # The people told by their own choices: the shared addresses leave theirs out.
    people = notices.people_for(alert.tenant_id)
    notify_later(tenant, subject, f"{alert.message}\n\n{alert.subject}", payload(alert, event),
                 frozenset(u.email.lower() for u in people))
    notices.for_alert(alert, event, people=people)


def email(recipients: list[str], subject: str, text: str) -> int:
    return send_mail(subject, text, None, recipients)


def post_webhook(url: str, body: dict) -> int:
    """POST the body as JSON to a public address (services.webhooks), or DeliveryError."""
    return webhooks.post(url, body)
