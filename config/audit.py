"""The audit log wired to the apps: django-auditlog records every save and delete of the models
it tracks (AUDITLOG_* in the settings: everything but what is metered, the statements and their
lines, refusals and the outbox), with before and after; here each entry gains who did it
(core.audit: the person, the API token and its owner, or the job), the client's address and
the tenant the object belongs to, so operators can filter by tenant and a lead reads its own.
"""

from contextvars import ContextVar

from auditlog.apps import AuditlogConfig
from django.db.models.signals import pre_save
from django.utils.translation import gettext_lazy as _

from core import audit
from core.clientip import client_ip

_instance: ContextVar = ContextVar("gpuloans_audited_instance", default=None)


def tenant_of(instance) -> int | None:
    """The tenant an audited object belongs to, where it belongs to one."""
    from loans.models import Contract, Tenant  # noqa: PLC0415 - app registry ready

    if isinstance(instance, Tenant):
        return instance.pk
    if getattr(instance, "tenant_id", None) is not None:
        return instance.tenant_id
    contract_id = getattr(instance, "contract_id", None)
    if contract_id is not None:
        cached = getattr(instance, "_state", None)
        contract = cached.fields_cache.get("contract") if cached is not None else None
        if contract is not None:
            return contract.tenant_id
        return Contract.objects.filter(pk=contract_id).values_list(
            "tenant_id", flat=True).first()
    return None


def _remember(sender, instance, **_kwargs):
    _instance.set(instance)
    return None


def _who(sender, instance, **_kwargs) -> None:
    """Fill in who, from where and whose, as the entry is saved."""
    data = dict(instance.additional_data or {})
    model = instance.content_type.model_class()
    if model is not None and isinstance(instance.changes, dict):
        # The library lists a new object's reverse relations too ("statements":
        # "loans.Statement.None"): they are other objects' fields, logged with those.
        reverse = {f.name for f in model._meta.get_fields() if f.auto_created and not f.concrete}
        instance.changes = {k: v for k, v in instance.changes.items() if k not in reverse}
    here = audit.current()
    if here is not None:
        user = here.user()
        if instance.actor_id is None and user is not None:
            instance.actor = user
            instance.actor_email = user.email or None
        if here.token is not None:
            data["token"] = {"id": here.token.pk, "name": here.token.name,
                             "prefix": here.token.token_prefix}
        if here.job:
            data["job"] = here.job
        if here.request is not None and not instance.remote_addr:
            instance.remote_addr = client_ip(here.request) or None
    if "tenant" not in data:
        subject = _instance.get()
        if subject is None or type(subject) is not model or instance.object_pk != str(
                subject.pk):
            # An entry a write outside the signals logged itself (core.audit.changed)
            subject = model._base_manager.filter(pk=instance.object_pk).first() if (
                model is not None and instance.object_pk not in ("", "None")) else None
        tenant = tenant_of(subject) if subject is not None else None
        if tenant is not None:
            data["tenant"] = tenant
    instance.additional_data = data or None


class AuditConfig(AuditlogConfig):
    """django-auditlog, with who acted and whose object it was on every entry."""

    verbose_name = _("Audit log")

    def ready(self):
        super().ready()
        from auditlog.models import LogEntry  # noqa: PLC0415
        from auditlog.signals import pre_log  # noqa: PLC0415
        from django.contrib import admin  # noqa: PLC0415

        pre_log.connect(_remember, dispatch_uid="gpuloans-audit-remember")
        pre_save.connect(_who, sender=LogEntry, dispatch_uid="gpuloans-audit-who")
        # Operators read the log on its own page (/audit/), filtered and exported; the
        # library's admin list would be a second, untranslated one.
        if admin.site.is_registered(LogEntry):
            admin.site.unregister(LogEntry)
