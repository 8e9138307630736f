"""Who is acting, for the audit log (django-auditlog keeps the entries; config.audit wires it):
the person of a request (its session, or the API token and its owner), or the job (a Celery
task, a management command). One context a request, task or command; nested ones stack.

Writes that bypass the models' signals (`QuerySet.update`, bulk inserts) log themselves with
`changed`, `created` and `wrote_many`: one entry each object changed or inserted, with its before
and after, or one entry naming what a bulk write wrote (a close's statements). A queryset's
delete sends each object's signals, so the library logs it.

Imports no app of this project: the entries are auditlog's own model.
"""

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.core.management.base import BaseCommand


@dataclass
class Acting:
    request: Any = None  # the Django request; its user is read when an entry is written
    token: Any = None  # the API token a request authenticated with
    job: str = ""  # "task loans.tasks.close_periods", "command close_periods"

    def user(self):
        if self.token is not None:
            return self.token.user
        user = getattr(self.request, "user", None)
        return user if user is not None and user.is_authenticated else None


_acting: ContextVar[Acting | None] = ContextVar("gpuloans_acting", default=None)


def current() -> Acting | None:
    return _acting.get()


@contextlib.contextmanager
def acting(*, request=None, job: str = "") -> Iterator[Acting]:
    """Writes inside are done by `request`'s person, or by `job`."""
    here = Acting(request=request, job=job)
    reset = _acting.set(here)
    try:
        yield here
    finally:
        _acting.reset(reset)


def note_token(token) -> None:
    """The request being served authenticated with `token` (an ApiToken)."""
    here = _acting.get()
    if here is not None:
        here.token = token


class AuditMiddleware:
    """Every request acts as its person (read when an entry is written: the session's user, or
    the API token's owner once DRF has authenticated it)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with acting(request=request):
            return self.get_response(request)


class AuditedCommand(BaseCommand):
    """A management command whose writes the audit log names it for."""

    def execute(self, *args, **options):
        name = type(self).__module__.rsplit(".", 1)[-1]
        if current() is not None and current().job:
            return super().execute(*args, **options)
        with acting(job=f"command {name}"):
            return super().execute(*args, **options)


def _entries():
    from auditlog.models import LogEntry  # noqa: PLC0415 - the app registry is ready by now

    return LogEntry


def changed(instance, before: dict, after: dict, *, tenant: int | None = None) -> None:
    """Log a change made with `QuerySet.update` to `instance` (its fields' values before and
    after; only those that differ are kept)."""
    changes = {name: [_text(before.get(name)), _text(value)] for name, value in after.items()
               if before.get(name) != value}
    if not changes:
        return
    LogEntry = _entries()
    LogEntry.objects.log_create(instance, action=LogEntry.Action.UPDATE, changes=changes,
                                changes_text="", force_log=True,
                                additional_data=_data(tenant))


def created(instances) -> None:
    """Log rows inserted with `bulk_create` (no signal), each with its fields as created."""
    from auditlog.diff import model_instance_diff  # noqa: PLC0415

    LogEntry = _entries()
    for instance in instances:
        LogEntry.objects.log_create(instance, action=LogEntry.Action.CREATE,
                                    changes=model_instance_diff(None, instance) or {},
                                    force_log=True)


def wrote_many(items: list[tuple[Any, dict, int | None]]) -> None:
    """One entry a bulk write about each instance (a close's statements of one contract),
    its summary saying what was written, as {what: (before, after)}; all in one INSERT, each
    entry as log_create would make it and told to the same pre-save receivers (who acted)."""
    if not items:
        return
    from auditlog.cid import get_cid  # noqa: PLC0415 - the app registry is ready by now
    from django.contrib.contenttypes.models import ContentType  # noqa: PLC0415
    from django.db.models.signals import pre_save  # noqa: PLC0415

    LogEntry = _entries()
    entries = []
    for instance, summary, tenant in items:
        entry = LogEntry(
            content_type=ContentType.objects.get_for_model(instance),
            object_pk=str(instance.pk), object_id=instance.pk, object_repr=str(instance),
            action=LogEntry.Action.CREATE, cid=get_cid(),
            changes={k: [_text(a), _text(b)] for k, (a, b) in summary.items()},
            additional_data=_data(tenant))
        pre_save.send(sender=LogEntry, instance=entry, raw=False, using="default",
                      update_fields=None)
        entries.append(entry)
    LogEntry.objects.bulk_create(entries)


def _data(tenant: int | None) -> dict:
    return {} if tenant is None else {"tenant": tenant}


def _text(value) -> str:
    return "None" if value is None else str(value)
