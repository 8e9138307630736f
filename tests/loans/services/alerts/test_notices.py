"""Who is told what, when, once: a week of alerts under mixed choices, run hour by hour with
every job run twice an hour (a restart), checked against a model written here; the digest's
picture against the page's burn-down; statements by e-mail with their PDF."""

import io
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command

from loans.models import Alert, Membership, Notice, NoticeProfile, Statement, Timing
from loans.models.notices import DIGEST, STATEMENT
from loans.services.alerts import delivery, digest, notices, notify
from loans.services.ledger.closing import close_due_periods
from loans.services.ledger.verdict import open_period
from loans.web import charts
from tests.conftest import make_user
from tests.ledger import attribute, meter

# The kinds migration 0037 makes required (tests/conftest.py: required_alerts).
pytestmark = pytest.mark.usefixtures("required_alerts")

MONDAY = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)
K = Alert.Kind


def person(name, tenant, timings=None, language="en", *, operator=False):
    user = make_user(name, staff=operator)
    user.email = f"{name}@example.com"
    user.save()
    if tenant is not None:
        Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.LEAD)
    if timings is not None:
        NoticeProfile.objects.create(user=user, language=language, timings=timings)
    return user


# (hour after Monday 00:00 UTC, kind, the tenant's or the operators', event, subject)
EVENTS = [
    (10, K.COMMITMENT_USED, True, "opened", "contract:1:period:2:used"),
    (33, K.COMMITMENT_USED, True, "resolved", "contract:1:period:2:used"),
    (59, K.IDLE_GPUS, True, "opened", "tenant:1:idle"),
    (63, K.IDLE_GPUS, True, "resolved", "tenant:1:idle"),
    (84, K.GUARANTEE_AT_RISK, True, "opened", "contract:1:guarantee"),
    (104, K.NODE_SILENT, False, "opened", "node:gpu-node-07"),
]
HOURS = 8 * 24 + 9  # through the second Monday's digest


def next_digest(moment: datetime, cadence: str) -> datetime:
    """The model: the first digest hour (07:00 UTC; Mondays for the weekly) after `moment`."""
    at = moment.replace(hour=7, minute=0)
    if at <= moment:
        at += timedelta(days=1)
    while cadence == Timing.WEEKLY and at.weekday() != 0:
        at += timedelta(days=1)
    return at


def expected(people: dict, required: set) -> Counter:
    """(person, hour sent, what) for every message the model says goes out."""
    out = Counter()
    waiting = {}  # (person, digest hour, cadence) -> events folded
    for name, (user, tenant_lead) in people.items():
        profile = notices.profile_of(user)
        for hour, kind, tenants, event, _subject in EVENTS:
            if tenants != tenant_lead:
                continue
            when = notices.timing(profile, kind, required)
            moment = MONDAY + timedelta(hours=hour)
            if when == Timing.NOW:
                out[(name, moment, f"{kind}:{event}")] += 1
            elif when in (Timing.DAILY, Timing.WEEKLY):
                waiting.setdefault((name, next_digest(moment, when), when), []).append(kind)
        if notices.timing(profile, DIGEST, required) == Timing.WEEKLY:
            for monday in (MONDAY, MONDAY + timedelta(days=7)):
                waiting.setdefault((name, monday.replace(hour=7), Timing.WEEKLY), [])
    for (name, at, cadence), _kinds in waiting.items():
        out[(name, at, f"digest:{cadence}")] += 1
    return out


def label(message) -> str:
    if "Your week" in message.subject or "你的一周" in message.subject:
        return "digest:weekly"
    if "Today's alerts" in message.subject or "今日提醒" in message.subject:
        return "digest:daily"
    notice = Notice.objects.get(kind="alert", user__email=message.to[0],
                                sent_at=message.sent_at)
    return f"{notice.alert.kind}:{notice.event}"


@pytest.mark.django_db
@pytest.mark.filterwarnings("error:Glyph:UserWarning")  # the Chinese digest's picture too
def test_a_week_of_alerts_under_mixed_choices_reaches_each_person_when_they_chose_once(
        tenant, contract, settings):
    settings.DIGEST_HOUR, settings.DIGEST_WEEKDAY = 7, 0
    required = notices.required_kinds()
    assert {K.GUARANTEE_AT_RISK, K.BUDGET_USED} <= required
    people = {
        "eager": (person("eager", tenant), True),  # no choices made: all at once, weekly digest
        "daily": (person("daily", tenant, {K.COMMITMENT_USED: "daily", K.IDLE_GPUS: "never",
                                           DIGEST: "never"}), True),
        "weekly": (person("weekly", tenant, {k: "weekly" for k in K.values} | {
            DIGEST: "weekly"}, language="zh-hans"), True),
        # "never" for a kind made required since: told at once anyway
        "stale": (person("stale", tenant, {K.GUARANTEE_AT_RISK: "never",
                                           K.COMMITMENT_USED: "never", K.IDLE_GPUS: "never",
                                           DIGEST: "never"}), True),
        "ops": (person("ops", None, operator=True), False),
    }
    member = person("member", None)  # a member, not a lead: told nothing
    Membership.objects.create(user=member, tenant=tenant, role=Membership.Role.MEMBER)
    alerts, seen = {}, Counter()
    with time_machine.travel(MONDAY, tick=False) as clock:
        for hour in range(HOURS):
            now = MONDAY + timedelta(hours=hour)
            for at, kind, tenants, event, subject in EVENTS:
                if at != hour:
                    continue
                if event == "opened":
                    alerts[subject] = Alert.objects.create(
                        tenant=tenant if tenants else None, kind=kind, subject=subject,
                        message=f"{kind} happened", opened_at=now)
                else:
                    alert = alerts[subject]
                    alert.state, alert.resolved_at = "resolved", now
                    alert.save()
                notify.notify_alert(alerts[subject], event)
            for _restart in range(2):
                before = len(mail.outbox)
                digest.write_due(now)
                delivery.deliver_due(now)
                for message in mail.outbox[before:]:
                    message.sent_at = now
            clock.shift(timedelta(hours=1))
    names = {u.email: name for name, (u, _t) in people.items()} | {member.email: "member"}
    for message in mail.outbox:
        assert len(message.to) == 1
        seen[(names[message.to[0]], message.sent_at, label(message))] += 1
    assert seen == expected(people, required)
    assert all(n == 1 for n in seen.values())  # once, though every job ran twice an hour
    # what the digests carried: the daily one the alert that waited, the weekly one in Chinese
    daily = [m for m in mail.outbox if names[m.to[0]] == "daily" and "Today's" in m.subject]
    assert [m.sent_at for m in daily] == [MONDAY + timedelta(days=1, hours=7),
                                          MONDAY + timedelta(days=2, hours=7)]
    assert "commitment_used happened" in daily[0].body and "opened" in daily[0].body
    assert "[resolved]" in daily[1].body
    weekly = [m for m in mail.outbox if names[m.to[0]] == "weekly" and m.sent_at.day == 14]
    assert len(weekly) == 1 and "你的一周" in weekly[0].subject
    for kind in (K.COMMITMENT_USED, K.IDLE_GPUS, K.GUARANTEE_AT_RISK):
        assert f"{kind} happened" in weekly[0].body
    assert "node_silent happened" not in weekly[0].body  # the operators', not the tenant's
    ops = [m for m in mail.outbox if names[m.to[0]] == "ops"]
    assert any("Vision Lab" in m.body and "Your week" in m.subject for m in ops)  # the fleet


@pytest.mark.django_db
def test_a_required_kind_cannot_be_chosen_off(client, lead):
    client.force_login(lead)
    form = {f"when_{k}": "now" for k in K.values} | {"when_digest": "weekly",
                                                     "when_statement": "now"}
    answer = client.post("/en/notifications/", {"action": "choices", "language": "en",
                                                **form, "when_guarantee_at_risk": "never"})
    assert answer.status_code == 400
    assert "guarantee_at_risk" not in (NoticeProfile.objects.filter(user=lead).first()
                                       or NoticeProfile(user=lead)).timings
    answer = client.post("/en/notifications/", {"action": "choices", "language": "zh-hans",
                                                **form, "when_idle_gpus": "never"})
    assert answer.status_code == 302
    profile = NoticeProfile.objects.get(user=lead)
    assert profile.language == "zh-hans" and profile.timings["idle_gpus"] == "never"


@pytest.mark.django_db
def test_the_digests_picture_is_the_pages_burn_down(tenant, contract):
    attribute(tenant)
    meter(tenant.slug, datetime(2026, 12, 1, tzinfo=UTC), 100, gpus=4)
    now = datetime(2026, 12, 9, 3, tzinfo=UTC)
    with time_machine.travel(now, tick=False):
        found = open_period(contract, now)
        page = charts.burndown_figure(found.figures, contract.zone)
        drawn = digest.chart(found)
    traces = {t["name"]: t for t in page["data"]}
    lines = {line.get_label(): line for line in drawn.axes[0].get_lines()}
    for name in ("Ideal", "Remaining", "Forecast"):
        page_y = [float("nan") if v is None else v for v in traces[name]["y"]]
        drawn_y = list(lines[name].get_ydata())
        assert len(drawn_y) == len(page_y) > 100
        assert all((a == b) or (a != a and b != b) for a, b in zip(drawn_y, page_y, strict=True))
        page_x = [datetime.fromisoformat(x) for x in traces[name]["x"]]
        assert [x.replace(second=0, microsecond=0) for x in lines[name].get_xdata()] == page_x
    series = digest.series(found)
    assert series["p10"] == traces["Forecast P10"]["y"]
    assert series["p90"] == traces["Forecast P10–P90"]["y"]
    assert any(v is not None and v < 1000 for v in series["remaining"])  # usage is drawn
    assert digest.png(drawn)[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.django_db
def test_a_closed_statement_is_mailed_to_each_lead_with_its_pdf_once(tenant, contract):
    eager = person("eager", tenant)
    person("quiet", tenant, {STATEMENT: "never"})
    chinese = person("chinese", tenant, {}, language="zh-hans")
    now = datetime(2026, 12, 5, tzinfo=UTC)
    run = close_due_periods(now)
    assert run.written
    made = notices.for_statements(run.written, now)
    notices.for_statements(run.written, now)  # the command run again
    assert {n.user for n in made} == {eager, chinese}
    delivery.deliver_due(now)
    delivery.deliver_due(now)
    assert sorted(m.to[0] for m in mail.outbox) == ["chinese@example.com", "eager@example.com"]
    statement = Statement.objects.get()
    for message in mail.outbox:
        name, body, kind = message.attachments[0]
        assert kind == "application/pdf" and body[:5] == b"%PDF-"
        assert name == f"vision-contract-{contract.pk}-period-1.pdf"
        assert f"{statement.total_cost:,.2f}" in message.subject
    zh = next(m for m in mail.outbox if m.to == ["chinese@example.com"])
    assert "/zh-hans/tenants/vision/" in zh.body


@pytest.mark.django_db
def test_a_leads_address_in_the_tenants_list_is_told_by_the_leads_choice(
        tenant, monkeypatch, django_capture_on_commit_callbacks):
    lead = person("daily", tenant, {K.IDLE_GPUS: "never"})
    tenant.alert_emails = "team@example.com, DAILY@example.com"
    tenant.save()
    queued = []
    monkeypatch.setattr(notify, "enqueue", lambda *args: queued.append(args))
    alert = Alert.objects.create(tenant=tenant, kind=K.IDLE_GPUS, subject="tenant:1:idle",
                                 message="idle", opened_at=MONDAY)
    with django_capture_on_commit_callbacks(execute=True):
        notify.notify_alert(alert, "opened")
    assert [args[1] for args in queued if args[0] == notify.SEND_EMAIL] == [
        ["team@example.com"]]
    assert not Notice.objects.filter(user=lead).exists()  # the lead chose not to be told


@pytest.mark.django_db
def test_send_notices_writes_the_due_digests_and_sends_once(tenant, contract):
    person("eager", tenant)
    out = io.StringIO()
    with time_machine.travel(MONDAY.replace(hour=8), tick=False):
        call_command("send_notices", stdout=out)
        call_command("send_notices", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["1 digests written.", "... 1 sent, 0 failed",
                         "1 sent, 0 failed (tried again later)."]
    assert lines[3:] == ["0 digests written.", "0 sent, 0 failed (tried again later)."]
    assert len(mail.outbox) == 1 and "Your week" in mail.outbox[0].subject
    html, kind = mail.outbox[0].alternatives[0]
    assert kind == "text/html" and f'src="cid:burndown-{contract.pk}"' in html
    picture = next(a for a in mail.outbox[0].attachments if hasattr(a, "get_content_type"))
    assert picture.get_content_type() == "image/png"
    assert picture["Content-ID"] == f"<burndown-{contract.pk}>"
