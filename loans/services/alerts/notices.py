"""The outbox of what people and channels are told (loans.models.Notice).

An alert's event becomes, in the transaction that opened or resolved it, one notice for each
of its tenant's leads (the operators, for alerts no tenant owns) who have an e-mail address,
timed by their choice for its kind, and one for each of the tenant's chat channels (at once).
A closed statement becomes one for each lead, its PDF attached. Each notice's key is unique:
an event, a digest or a statement is told to each person or channel once. What is due is
sent by loans.services.alerts.delivery; the digests (loans.services.alerts.digest) are
notices too, written once a day or week for each person, carrying what waited for them."""

from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone, translation

from core.roles import OPERATORS
from loans.models import (
    Alert,
    Channel,
    Membership,
    Notice,
    NoticeProfile,
    RequiredAlert,
    Statement,
    Tenant,
    Timing,
)
from loans.models.notices import DIGEST, STATEMENT
from loans.services.alerts.outbox import enqueue


def required_kinds() -> set[str]:
    return set(RequiredAlert.objects.values_list("kind", flat=True))


def choices_for(kind: str, required: set[str]) -> list[tuple[str, str]]:
    """The timings a person may choose for a kind: a required alert cannot be turned off,
    the digest is weekly or not at all, a statement comes at once or not at all."""
    if kind == DIGEST:
        allowed = (Timing.WEEKLY, Timing.NEVER)
    elif kind == STATEMENT:
        allowed = (Timing.NOW, Timing.NEVER)
    elif kind in required:
        allowed = (Timing.NOW, Timing.DAILY, Timing.WEEKLY)
    else:
        allowed = tuple(Timing)
    return [(t.value, t.label) for t in allowed]


def timing(profile: NoticeProfile | None, kind: str, required: set[str]) -> str:
    """A person's timing for a kind: their choice where it is still one they may make (an
    operator may have made the kind required since), else the default (at once; the digest
    weekly)."""
    default = Timing.WEEKLY if kind == DIGEST else Timing.NOW
    chosen = (profile.timings if profile else {}).get(kind, default)
    allowed = {value for value, _label in choices_for(kind, required)}
    return chosen if chosen in allowed else default


def language_of(profile: NoticeProfile | None) -> str:
    return profile.language if profile else settings.LANGUAGE_CODE


def leads(**where):
    """Active leads with an address (of the tenant `where` names, or of any)."""
    return get_user_model().objects.filter(
        is_active=True, memberships__role=Membership.Role.LEAD,
        **{f"memberships__{k}": v for k, v in where.items()}).exclude(email="").distinct()


def operators():
    return get_user_model().objects.filter(is_active=True, is_staff=True).filter(
        Q(is_superuser=True) | Q(groups__name=OPERATORS)).exclude(email="").distinct()


def people_for(tenant_id: int | None):
    """Who is told of a tenant's events as a person: its leads; the operators where no tenant
    owns the event."""
    people = leads(tenant_id=tenant_id) if tenant_id else operators()
    return list(people.select_related("notice_profile"))


def profile_of(user) -> NoticeProfile | None:
    try:
        return user.notice_profile
    except NoticeProfile.DoesNotExist:
        return None


def for_alert(alert: Alert, event: str, now: datetime | None = None,
              people: list | None = None) -> list[Notice]:
    """The alert event's notices, in the caller's transaction; delivered once it commits
    (`people`: people_for(alert.tenant_id), where the caller has read them already)."""
    now = now or timezone.now()
    required = required_kinds()
    notices = []
    for user in people_for(alert.tenant_id) if people is None else people:
        when = timing(profile_of(user), alert.kind, required)
        if when == Timing.NEVER:
            continue
        notices.append(Notice(key=f"alert:{alert.pk}:{event}:u{user.pk}", kind=Notice.Kind.ALERT,
                              user=user, alert=alert, event=event, timing=when,
                              created_at=now))
    for channel in Channel.objects.filter(tenant_id=alert.tenant_id):
        notices.append(Notice(key=f"alert:{alert.pk}:{event}:c{channel.pk}",
                              kind=Notice.Kind.ALERT, channel=channel, alert=alert,
                              event=event, timing=Timing.NOW, created_at=now))
    return _write(notices)


def for_statements(statements: list[Statement], now: datetime | None = None) -> list[Notice]:
    """A notice for each closed statement to each of its tenant's leads who take them."""
    now = now or timezone.now()
    by_tenant: dict[int, list] = {}
    notices = []
    for statement in statements:
        tenant_id = statement.contract.tenant_id
        if tenant_id not in by_tenant:
            by_tenant[tenant_id] = people_for(tenant_id)
        for user in by_tenant[tenant_id]:
            if timing(profile_of(user), STATEMENT, set()) == Timing.NEVER:
                continue
            notices.append(Notice(key=f"statement:{statement.pk}:u{user.pk}",
                                  kind=Notice.Kind.STATEMENT, user=user, statement=statement,
                                  timing=Timing.NOW, created_at=now))
    return _write(notices)


def _write(notices: list[Notice]) -> list[Notice]:
    if notices:
        Notice.objects.bulk_create(notices, ignore_conflicts=True)
        transaction.on_commit(deliver_soon)
    return notices


def deliver_soon() -> None:
    enqueue(DELIVER_NOTICES)


DELIVER_NOTICES = "loans.tasks.deliver_notices"


def page_url(tenant: Tenant | None, language: str) -> str:
    with translation.override(language):
        path = reverse("tenant", args=[tenant.slug]) if tenant else reverse("alerts")
    return settings.SITE_URL + path


