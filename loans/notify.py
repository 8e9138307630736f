"""Telling people about alerts: e-mail to the tenant's addresses (the operators' for alerts no
tenant owns) and a JSON POST to the tenant's webhook. Both are Celery tasks, queued after the
alert commits and retried with backoff, so a mail server or receiver that is down delays a
notification and loses none."""

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


def notify_later(alert: Alert, event: str) -> None:
    """Queue the notifications this tenant chose, once the alert's transaction commits."""
    from loans.tasks import deliver_webhook, send_alert_email

    tenant = alert.tenant
    recipients = tenant.alert_recipients() if tenant else list(settings.ALERT_EMAILS)
    if recipients:
        transaction.on_commit(lambda: send_alert_email.delay(alert.pk, event))
    if tenant and tenant.webhook_url:
        transaction.on_commit(lambda: deliver_webhook.delay(alert.pk, event))


def email(alert_id: int, event: str) -> int:
    alert = Alert.objects.select_related("tenant").get(pk=alert_id)
    tenant = alert.tenant
    recipients = tenant.alert_recipients() if tenant else list(settings.ALERT_EMAILS)
    state = "resolved" if event == "resolved" else alert.get_kind_display()
    subject = f"[gpuloans] {tenant.name if tenant else 'fleet'}: {state}"
    return send_mail(subject, f"{alert.message}\n\n{alert.subject}", None, recipients)


def post_webhook(alert_id: int, event: str) -> int:
    """POST the alert as JSON; a 2xx answer is delivery, anything else raises DeliveryError."""
    alert = Alert.objects.select_related("tenant").get(pk=alert_id)
    url = alert.tenant.webhook_url
    request = urllib.request.Request(  # noqa: S310 - operators set http(s) URLs only
        url, data=json.dumps(payload(alert, event)).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "gpuloans-alerts"})
    try:
        with urllib.request.urlopen(  # noqa: S310
                request, timeout=settings.WEBHOOK_TIMEOUT_SECONDS) as response:
            return response.status
    except urllib.error.HTTPError as error:
        raise DeliveryError(f"{url} answered {error.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise DeliveryError(f"{url}: {error}") from None
