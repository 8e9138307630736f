"""The audit log as people read it (config.audit writes it): entries filtered by tenant, kind
of object, person and date, newest first, each with who acted (the person, the API token and
its owner, or the job), what changed from what to what, and whose object it was.

Operators read every entry; a lead reads its own tenant's (loans.access: read-audit).
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from loans.models import Tenant

ACTIONS = {LogEntry.Action.CREATE: "create", LogEntry.Action.UPDATE: "update",
           LogEntry.Action.DELETE: "delete", LogEntry.Action.ACCESS: "access"}


@dataclass(frozen=True)
class Filters:
    tenant: int | None = None
    kind: int | None = None  # a ContentType's id
    person: str = ""  # a username, exactly
    since: date | None = None  # from this day (UTC), inclusive
    until: date | None = None  # to this day (UTC), inclusive


def kinds() -> list[tuple[int, str]]:
    """The kinds of object the log keeps, by name (from what it tracks: no scan of the log)."""
    models = [m for m in auditlog.get_models() if not m._meta.auto_created]
    types = ContentType.objects.get_for_models(*models)
    return sorted(((types[m].pk, str(m._meta.verbose_name)) for m in models),
                  key=lambda pair: pair[1])


def entries(filters: Filters) -> QuerySet:
    found = LogEntry.objects.select_related("actor", "content_type").order_by("-timestamp", "-pk")
    if filters.tenant is not None:
        found = found.filter(additional_data__tenant=filters.tenant)
    if filters.kind is not None:
        found = found.filter(content_type_id=filters.kind)
    if filters.person:
        found = found.filter(actor__username=filters.person)
    if filters.since is not None:
        found = found.filter(timestamp__gte=datetime.combine(filters.since, time(),
                                                             tzinfo=UTC))
    if filters.until is not None:
        found = found.filter(timestamp__lt=datetime.combine(filters.until + timedelta(days=1),
                                                            time(), tzinfo=UTC))
    return found


def who(entry: LogEntry) -> str:
    """The person (and the token they acted with), or the job."""
    data = entry.additional_data or {}
    token = data.get("token")
    person = entry.actor.get_username() if entry.actor is not None else ""
    if token:
        return _("%(person)s with token %(token)s (%(prefix)s…)") % {
            "person": person, "token": token.get("name", ""), "prefix": token.get("prefix", "")}
    if person:
        return person
    job = data.get("job", "")
    kind, _space, name = job.partition(" ")
    if kind == "command":
        return _("the command %(name)s") % {"name": name}
    if kind == "task":
        return _("the job %(name)s") % {"name": name}
    if job:
        return job
    return _("the system")


# What an entry a write logged itself names that is no field of its object.
OWN_KEYS = {"statements_written": gettext_lazy("statements written")}


def changes(entry: LogEntry, *, shown: bool = False) -> list[tuple[str, str, str]]:
    """(field, before, after) of each field the entry changed: the field's name and its stored
    values (CSV), or `shown`, its label and values as a reader reads them (choices by their
    labels, dates in the reader's format)."""
    if shown:
        found = entry.changes_display_dict
        found = {str(OWN_KEYS.get(k, k)): v for k, v in found.items()}
    else:
        found = entry.changes or {}
    out = []
    for name, values in sorted(found.items()):
        if isinstance(values, dict):  # a many-to-many change: its objects added and removed
            values = [", ".join(map(str, values.get("objects", []))), values.get("type", "")]
        before, after = (list(values) + ["", ""])[:2]
        out.append((str(name), _shown(before), _shown(after)))
    return out


def _shown(value) -> str:
    return "" if value in (None, "None") else str(value)


def tenant_names(entries_seen: list[LogEntry]) -> dict[int, str]:
    ids = {(e.additional_data or {}).get("tenant") for e in entries_seen} - {None}
    return dict(Tenant.objects.filter(pk__in=ids).values_list("pk", "slug"))


COLUMNS = ("when_utc", "who", "job", "token", "action", "object_kind", "object_id", "object",
           "tenant", "field", "before", "after", "address")


def rows(found: QuerySet):
    """One CSV row a field changed (an entry without field changes: one row), in COLUMNS'
    order, streamed in pages."""
    last = None
    page = list(found[:1000])
    while page:
        names = tenant_names(page)
        for entry in page:
            data = entry.additional_data or {}
            token = data.get("token") or {}
            base = [entry.timestamp.astimezone(UTC).isoformat(),
                    entry.actor.get_username() if entry.actor else "", data.get("job", ""),
                    token.get("name", ""), ACTIONS.get(entry.action, str(entry.action)),
                    entry.content_type.model, entry.object_pk, entry.object_repr,
                    names.get(data.get("tenant"), "")]
            address = entry.remote_addr or ""
            for name, before, after in changes(entry) or [("", "", "")]:
                yield [*base, name, before, after, address]
        last = page[-1]
        page = list(found.filter(timestamp__lte=last.timestamp).exclude(
            timestamp=last.timestamp, pk__gte=last.pk)[:1000]) if len(page) == 1000 else []
