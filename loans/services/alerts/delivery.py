"""Sending the notices that are due (loans.services.alerts.notices), each once: it is locked
and marked sent in one transaction, so two runs never send one twice. A failure is tried
again with a doubling wait (30 s to an hour), up to NOTICE_MAX_ATTEMPTS; a channel that fails
is marked failing, which opens the operators' alert about it once (loans.services.alerts.
conditions) until the channel takes a message again."""

import logging
from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from loans.models import Alert, Channel, Notice, Timing
from loans.services.alerts import channels, digest
from loans.services.alerts.notices import language_of, page_url, profile_of
from loans.services.alerts.webhooks import DeliveryError
from loans.services.exports import pdf
from loans.services.ledger import read as ledgers

log = logging.getLogger(__name__)
FIRST_WAIT, LONGEST_WAIT = 30, 3600  # seconds between tries of a notice that failed
BATCH = 200  # notices sent a run, oldest first


def due(now: datetime):
    """Notices to send now: unsent, not waiting for a digest, not given up, past their wait."""
    return Notice.objects.filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
        sent_at__isnull=True, folded_into__isnull=True,
        attempts__lt=settings.NOTICE_MAX_ATTEMPTS,
    ).filter(Q(timing=Timing.NOW) | Q(kind=Notice.Kind.DIGEST)).order_by("pk")


def deliver_due(now: datetime | None = None) -> tuple[int, int]:
    """Send the notices due, each under a row lock (two runs never send one twice); returns
    how many went and how many failed this run."""
    now = now or timezone.now()
    sent = failed = 0
    for pk in list(due(now).values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            notice = (due(now).select_for_update(skip_locked=True, of=("self",))
                      .select_related("user", "channel", "alert", "alert__tenant",
                                      "statement", "statement__contract")
                      .filter(pk=pk).first())
            if notice is None:
                continue
            try:
                if notice.kind == Notice.Kind.DIGEST:
                    digest.send(notice, now)
                else:
                    send(notice)
            except (DeliveryError, OSError) as error:
                failed += 1
                _failed(notice, str(error), now)
                continue
            notice.sent_at, notice.last_error = now, ""
            notice.save(update_fields=["sent_at", "last_error"])
            Notice.objects.filter(folded_into=notice).update(sent_at=now)
            if notice.channel_id and notice.channel.failing_since is not None:
                Channel.objects.filter(pk=notice.channel_id).update(failing_since=None,
                                                                    last_error="")
            sent += 1
    return sent, failed


def _failed(notice: Notice, error: str, now: datetime) -> None:
    notice.attempts += 1
    wait = min(FIRST_WAIT * 2 ** (notice.attempts - 1), LONGEST_WAIT)
    notice.next_attempt_at = now + timedelta(seconds=wait)
    notice.last_error = error[:300]
    notice.save(update_fields=["attempts", "next_attempt_at", "last_error"])
    log.warning("notice %s not delivered (try %s): %s", notice.key, notice.attempts, error)
    if notice.channel_id:
        Channel.objects.filter(pk=notice.channel_id, failing_since__isnull=True).update(
            failing_since=now)
        Channel.objects.filter(pk=notice.channel_id).update(last_error=error[:300])


def alert_words(alert: Alert, event: str, language: str) -> tuple[str, str, str]:
    """(title, text, link) of an alert's event in `language`."""
    tenant = alert.tenant
    with translation.override(language):
        state = _("resolved") if event == "resolved" else alert.get_kind_display()
        where = tenant.name if tenant else _("the fleet")
        title = f"[gpuloans] {where}: {state}"
        return title, str(alert.text), page_url(tenant, language)


def send(notice: Notice) -> None:
    """One alert or statement notice, by e-mail or to its channel; DeliveryError or OSError
    when it did not go."""
    if notice.kind == Notice.Kind.STATEMENT:
        return _send_statement(notice)
    if notice.channel_id:
        channel = notice.channel
        title, text, link = alert_words(notice.alert, notice.event, channel.language)
        with translation.override(channel.language):
            opening = _("Open the page")
            body = f"{text}\n\n[{opening}]({link})"
        return channels.send(channel.url, title, body)
    language = language_of(profile_of(notice.user))
    title, text, link = alert_words(notice.alert, notice.event, language)
    with translation.override(language):
        footer = _("Choose when you are told: %(url)s") % {
            "url": settings.SITE_URL + reverse("notifications")}
    EmailMultiAlternatives(title, f"{text}\n\n{link}\n\n{footer}", None,
                           [notice.user.email]).send()
    return None


def _send_statement(notice: Notice) -> None:
    statement = notice.statement
    contract = statement.contract
    language = language_of(profile_of(notice.user))
    ledger = ledgers.read(contract, timezone.now())
    ledger = replace(ledger, statements=[s for s in ledger.statements if s.pk == statement.pk])
    with translation.override(language):
        subject = _("[gpuloans] %(tenant)s: statement %(number)s, %(total)s %(currency)s") % {
            "tenant": contract.tenant.name, "number": statement.pk,
            "total": f"{statement.total_cost:,.2f}", "currency": statement.currency}
        text = _("The statement of %(tenant)s's contract %(contract)s for period %(period)s "
                 "is closed; it is attached as a PDF and on the page: %(url)s") % {
            "tenant": contract.tenant.name, "contract": contract.pk,
            "period": statement.period_index + 1,
            "url": page_url(contract.tenant, language)}
    message = EmailMultiAlternatives(subject, text, None, [notice.user.email])
    try:
        body = pdf.render(ledger, language)
    except pdf.PDFUnavailable as missing:
        raise DeliveryError(str(missing)) from None
    period = statement.period_index + 1 if statement.kind == "period" else None
    message.attach(pdf.filename(contract, period), body, pdf.MEDIA_TYPE)
    message.send()
