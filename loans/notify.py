"""Telling people about alerts and burst requests: e-mail to the tenant's addresses (the
operators' for events no tenant owns) and a JSON POST to the tenant's webhook. Both are Celery
tasks, queued after the event commits and retried with backoff, so a mail server or receiver
that is down delays a notification and loses none."""

import json
import urllib.error
import urllib.request

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from loans.models import Alert


class DeliveryError(Exception):
    """The receiver did not take the notification; worth retrying."""


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
    from loans.tasks import deliver_webhook, send_email

    recipients = tenant.alert_recipients() if tenant else list(settings.ALERT_EMAILS)
    if recipients:
        transaction.on_commit(lambda: send_email.delay(recipients, subject, text))
    if tenant and tenant.webhook_url:
        url = tenant.webhook_url
        transaction.on_commit(lambda: deliver_webhook.delay(url, body))


def notify_alert(alert: Alert, event: str) -> None:
    tenant = alert.tenant
    state = "resolved" if event == "resolved" else alert.get_kind_display()
    subject = f"[gpuloans] {tenant.name if tenant else 'fleet'}: {state}"
    notify_later(tenant, subject, f"{alert.message}\n\n{alert.subject}", payload(alert, event))


def email(recipients: list[str], subject: str, text: str) -> int:
    return send_mail(subject, text, None, recipients)


def post_webhook(url: str, body: dict) -> int:
    """POST the body as JSON; a 2xx answer is delivery, anything else raises DeliveryError."""
    request = urllib.request.Request(  # noqa: S310 - operators set http(s) URLs only
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "gpuloans-alerts"})
    try:
        with urllib.request.urlopen(  # noqa: S310
                request, timeout=settings.WEBHOOK_TIMEOUT_SECONDS) as response:
            return response.status
    except urllib.error.HTTPError as error:
        raise DeliveryError(f"{url} answered {error.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise DeliveryError(f"{url}: {error}") from None
