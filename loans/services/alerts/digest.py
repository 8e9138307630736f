"""The digests: one message a day to each person with alerts that waited for it, and one a
week to each lead (and operator) whether or not any did: each open period's verdict in the
page's words, its burn-down as a picture, what changed in the week, the open alerts.

Each digest is a notice (loans.models.Notice) keyed by its cadence, day and person: written
once, by whichever run of the hourly job first finds it due, with the waiting notices of its
cadence folded into it in the same transaction; sent once by the delivery like any notice.
A restart of the job, or two at once, writes and sends nothing twice.

The picture is drawn on the server by matplotlib (Agg, no display, no internet) from the
figures the page's Plotly chart is drawn from (loans.services.ledger.verdict.open_period):
the same series, as an image a mail client shows without running script."""

import io
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.mime.image import MIMEImage

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402 - the backend is chosen before pyplot loads
from django.conf import settings  # noqa: E402
from django.core.mail import EmailMultiAlternatives  # noqa: E402
from django.db import IntegrityError, transaction  # noqa: E402
from django.template.loader import render_to_string  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import translation  # noqa: E402
from django.utils.translation import gettext as _  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from loans.access import allowed  # noqa: E402
from loans.models import Alert, Amendment, Contract, Notice, Tenant, Timing  # noqa: E402
from loans.models.notices import DIGEST  # noqa: E402
from loans.services.alerts import notices  # noqa: E402
from loans.services.ledger.verdict import OpenPeriod, open_period  # noqa: E402

COLOURS = {"ideal": "#8a94a6", "remaining": "#1f5fbf", "forecast": "#e07b00"}
WEEK = timedelta(days=7)
# Latin first, then Chinese from Debian's fonts-noto-cjk (the PDF's fonts): matplotlib falls
# back glyph by glyph along the list.
FONTS = ["DejaVu Sans", "Noto Sans CJK SC"]


def _round(values) -> list[float | None]:
    return [None if v is None else round(v, 3) for v in values]


def series(found: OpenPeriod) -> dict[str, list]:
    """The burn-down's series as the page's chart draws them (loans.web.charts rounds the
    same way): wall-clock times in the contract's zone, and GPU-hours."""
    curve = found.figures.burndown
    zone = found.contract.zone
    return {"x": [p.astimezone(zone).replace(tzinfo=None) for p in curve.points],
            "ideal": _round(curve.ideal), "remaining": _round(curve.remaining),
            "forecast": _round(curve.forecast), "p10": _round(curve.forecast_p10),
            "p90": _round(curve.forecast_p90)}


def chart(found: OpenPeriod) -> Figure:
    """The burn-down as a matplotlib figure (the page's: ideal, remaining, forecast in its
    P10-P90 band while the period is open)."""
    with matplotlib.rc_context({"font.family": FONTS}):
        return _chart(found)


def _chart(found: OpenPeriod) -> Figure:
    data = series(found)
    figure = Figure(figsize=(6.4, 3.0), dpi=100)
    axes = figure.subplots()
    nan = float("nan")

    def line(name):
        return [nan if v is None else v for v in data[name]]

    axes.plot(data["x"], line("ideal"), color=COLOURS["ideal"], linestyle=":",
              label=_("Ideal"))
    if found.figures.now < found.figures.period.end:
        axes.fill_between(data["x"], line("p10"), line("p90"), color=COLOURS["forecast"],
                          alpha=0.18, linewidth=0, label=_("Forecast P10–P90"))
        axes.plot(data["x"], line("forecast"), color=COLOURS["forecast"], linestyle="--",
                  label=_("Forecast"))
    axes.plot(data["x"], line("remaining"), color=COLOURS["remaining"], linewidth=2.5,
              label=_("Remaining"))
    axes.axhline(0, color="#999999", linewidth=0.8)
    axes.set_title(_("Committed GPU-hours remaining"), loc="left", fontsize=11)
    axes.set_ylabel(_("GPU-hours"))
    axes.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    axes.legend(loc="upper right", fontsize=8, frameon=False)
    figure.tight_layout()
    return figure


def png(figure: Figure) -> bytes:
    out = io.BytesIO()
    with matplotlib.rc_context({"font.family": FONTS}):
        figure.savefig(out, format="png")
    return out.getvalue()


def due_at(now: datetime) -> tuple[datetime | None, list[str]]:
    """The digest moment of `now`'s UTC day (DIGEST_HOUR) once it has passed, and the
    cadences due then: daily, and weekly on DIGEST_WEEKDAY."""
    at = now.replace(hour=settings.DIGEST_HOUR, minute=0, second=0, microsecond=0)
    if now < at:
        return None, []
    return at, [Timing.DAILY] + ([Timing.WEEKLY] if at.weekday() == settings.DIGEST_WEEKDAY
                                 else [])


def write_due(now: datetime) -> int:
    """Write the digests of today's digest moment that are not written yet, folding into each
    the alerts that waited for it since the last (those that came after the moment wait for
    the next). Returns how many were written (0 on a second run the same day)."""
    written = 0
    at, cadences = due_at(now)
    required = notices.required_kinds()
    for cadence in cadences:
        waiting = Notice.objects.filter(kind=Notice.Kind.ALERT, timing=cadence,
                                        sent_at__isnull=True, folded_into__isnull=True,
                                        user__isnull=False, created_at__lte=at)
        people = set(waiting.values_list("user_id", flat=True))
        if cadence == Timing.WEEKLY:
            # Every lead and operator in two queries, however many tenants.
            everyone = {u.pk: u for u in notices.leads().select_related("notice_profile")}
            everyone.update({u.pk: u for u in notices.people_for(None)})
            people |= {pk for pk, u in everyone.items()
                       if notices.timing(notices.profile_of(u), DIGEST, required)
                       != Timing.NEVER}
        for user_id in sorted(people):
            key = f"digest:{cadence}:{at.date().isoformat()}:u{user_id}"
            try:
                with transaction.atomic():
                    digest = Notice.objects.create(
                        key=key, kind=Notice.Kind.DIGEST, user_id=user_id, event=cadence,
                        timing=cadence, created_at=now)
                    waiting.filter(user_id=user_id).update(folded_into=digest)
            except IntegrityError:  # written already, by an earlier run or one beside this
                continue
            written += 1
    if written:
        transaction.on_commit(notices.deliver_soon)
    return written


@dataclass
class Section:
    """One open period of a tenant the reader leads: what the page says of it."""

    tenant: Tenant
    contract: Contract
    verdict: object
    picture_id: str
    changes: list[str]


def _changes(tenant: Tenant, contract: Contract, since: datetime) -> list[str]:
    """What changed in the week: alerts opened and resolved, amendments written."""
    out = []
    for alert in Alert.objects.filter(tenant=tenant, opened_at__gte=since).order_by("opened_at"):
        out.append(_("Opened %(day)s: %(text)s") % {"day": f"{alert.opened_at:%m-%d}",
                                                   "text": alert.text})
    for alert in Alert.objects.filter(tenant=tenant, resolved_at__gte=since).order_by(
            "resolved_at"):
        out.append(_("Resolved %(day)s: %(kind)s") % {"day": f"{alert.resolved_at:%m-%d}",
                                                     "kind": alert.get_kind_display()})
    for amendment in Amendment.objects.filter(contract=contract, created_at__gte=since):
        out.append(_("Contract changed %(day)s: %(what)s") % {
            "day": f"{amendment.created_at:%m-%d}", "what": amendment.summary()})
    return out


def compose(notice: Notice, now: datetime) -> EmailMultiAlternatives | None:
    """The digest as an e-mail in the reader's language, or None where it has nothing to
    say (a daily digest whose alerts were all resolved away is still sent: they happened)."""
    user = notice.user
    language = notices.language_of(notices.profile_of(user))
    folded = list(notice.folded.select_related("alert", "alert__tenant").order_by("pk"))
    weekly = notice.event == Timing.WEEKLY
    sections, pictures, fleet = [], [], []
    with translation.override(language):
        if weekly:
            for tenant in Tenant.objects.filter(memberships__user=user,
                                                memberships__role="lead").distinct():
                for contract in tenant.contracts.filter(status=Contract.Status.ACTIVE):
                    found = open_period(contract, now)
                    if found is None:
                        continue
                    picture_id = f"burndown-{contract.pk}"
                    pictures.append((picture_id, png(chart(found))))
                    sections.append(Section(tenant, contract, found.verdict, picture_id,
                                            _changes(tenant, contract, now - WEEK)))
            if allowed(user, "operator-pages"):
                for contract in Contract.objects.filter(
                        status=Contract.Status.ACTIVE).select_related("tenant", "plan"):
                    found = open_period(contract, now)
                    if found is not None:
                        fleet.append((contract, found.verdict))
        if not (folded or sections or fleet):
            return None
        tenant_ids = [s.tenant.pk for s in sections]
        open_alerts = list(Alert.objects.filter(state=Alert.State.OPEN, tenant_id__in=tenant_ids)
                           .select_related("tenant").order_by("-opened_at")[:50]) if weekly else []
        if weekly and fleet:
            open_alerts += list(Alert.objects.filter(state=Alert.State.OPEN,
                                                     tenant__isnull=True)[:50])
        context = {
            "weekly": weekly, "sections": sections, "fleet": fleet, "folded": folded,
            "open_alerts": open_alerts, "site": settings.SITE_URL, "user": user,
            "choices_url": settings.SITE_URL + reverse("notifications"),
            "LANGUAGE_CODE": language,
        }
        subject = (_("[gpuloans] Your week: %(day)s") if weekly
                   else _("[gpuloans] Today's alerts: %(day)s")) % {"day": f"{now:%Y-%m-%d}"}
        text = render_to_string("loans/email/digest.txt", context)
        html = render_to_string("loans/email/digest.html", context)
    message = EmailMultiAlternatives(subject, text, None, [user.email])
    message.attach_alternative(html, "text/html")
    message.mixed_subtype = "related"
    for picture_id, data in pictures:
        image = MIMEImage(data, "png")
        image.add_header("Content-ID", f"<{picture_id}>")
        image.add_header("Content-Disposition", "inline", filename=f"{picture_id}.png")
        message.attach(image)
    return message


def send(notice: Notice, now: datetime) -> None:
    message = compose(notice, now)
    if message is not None:
        message.send()
