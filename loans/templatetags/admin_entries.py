"""The admin's log in the reader's language. Django keeps each action's object as the text
it read at the time (an operator working in English leaves "vision / Standard from
2026-11-01" behind) and names changed fields by their form labels, capitalised, which the
catalog holds in lower case: so the recent actions and an object's history read English on a
Chinese page. Here an object that still exists is named as it reads now, and a field label
is looked up as the catalog keeps it."""

import json
from collections import defaultdict

from django import template
from django.contrib.admin.models import LogEntry
from django.utils.text import capfirst
from django.utils.translation import gettext

register = template.Library()


@register.simple_tag
def recent_entries(user, limit: int = 10) -> list[LogEntry]:
    """The user's last `limit` actions, each with `shown_repr`: the object as it reads now
    in the active language, or the text kept when it is gone. One query a kind of object."""
    entries = list(LogEntry.objects.filter(user=user).select_related("content_type")
                   .order_by("-action_time")[:limit])
    wanted: dict[int, set[str]] = defaultdict(set)
    kinds = {}
    for entry in entries:
        if entry.content_type_id and not entry.is_deletion():
            wanted[entry.content_type_id].add(entry.object_id)
            kinds[entry.content_type_id] = entry.content_type
    found = {}
    for kind, ids in wanted.items():
        model = kinds[kind].model_class()
        if model is not None:
            # Their names read their foreign keys (a contract's, its tenant and plan).
            objects = model._default_manager.select_related().filter(pk__in=ids)
            found.update({(kind, str(obj.pk)): obj for obj in objects})
    for entry in entries:
        obj = found.get((entry.content_type_id, entry.object_id))
        entry.shown_repr = str(obj) if obj is not None else entry.object_repr
    return entries


def _label(name: str) -> str:
    """A field label as the catalog keeps it: as written, else in lower case, capitalised
    again."""
    translated = gettext(name)
    if translated == name and name[:1].isupper():
        lowered = name[:1].lower() + name[1:]
        if gettext(lowered) != lowered:
            return capfirst(gettext(lowered))
    return translated


@register.filter
def change_message(entry: LogEntry) -> str:
    """The entry's change message, its field labels in the active language."""
    try:
        parts = json.loads(entry.change_message or "")
    except json.JSONDecodeError:
        return entry.get_change_message()
    if not isinstance(parts, list):
        return entry.get_change_message()
    for part in parts:
        for action in ("added", "changed", "deleted"):
            detail = part.get(action) if isinstance(part, dict) else None
            if isinstance(detail, dict):
                if isinstance(detail.get("fields"), list):
                    detail["fields"] = [_label(str(f)) for f in detail["fields"]]
                if isinstance(detail.get("name"), str):
                    detail["name"] = _label(detail["name"])
    return LogEntry(change_message=json.dumps(parts)).get_change_message()
