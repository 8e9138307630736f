"""API tokens for people (operators, leads) and the integrations they run.

Like node tokens: random, shown once, stored as a SHA-256 hash. An operator's token reads every
tenant; a lead's reads only their own tenants, exactly as their login would. Each carries a
scope (`read`, or `read write`: a read token is refused every write) and an expiry
(API_TOKEN_DAYS from its issue unless given; tokens from before scopes have none).
"""

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.bearer import hash_token

API_TOKEN_PREFIX = "gplu_"
LAST_USED_EVERY = 300  # seconds: record use at most this often, not on every request


class Scope(models.TextChoices):
    READ = "read", _("read")
    READ_WRITE = "read write", _("read write")


MAX_DAYS = 3650


def default_expiry() -> datetime:
    return timezone.now() + timedelta(days=settings.API_TOKEN_DAYS)


class ApiToken(models.Model):
    Scope = Scope

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    name = models.CharField(_("name"), max_length=100, help_text=_("What uses it, e.g. Grafana."))
    token_hash = models.CharField(_("token hash"), max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(_("token"), max_length=16, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, editable=False)
    scope = models.CharField(_("scope"), max_length=10, choices=Scope.choices,
                             default=Scope.READ,
                             help_text=_("read: every read the user may make, no write."))
    expires_at = models.DateTimeField(
        _("expires"), null=True, default=default_expiry,
        help_text=_("Refused from then on (empty: a token from before expiries, never)."))

    class Meta:
        ordering = ["user__username", "name"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    def clean(self) -> None:
        now = timezone.now()
        if self.pk is None and self.expires_at is not None and not (
                now < self.expires_at <= now + timedelta(days=MAX_DAYS)):
            raise ValidationError({"expires_at": _(
                "An expiry from now to %(days)s days ahead.") % {"days": MAX_DAYS}})

    @property
    def writes(self) -> bool:
        return self.scope == Scope.READ_WRITE

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    @classmethod
    def issue(cls, *, user, name: str, scope: str = Scope.READ,
              expires_at: datetime | None = None) -> tuple["ApiToken", str]:
        """A new token for `user`; returns it in clear, the only time it exists so. ValueError
        for a scope that is none of Scope's or an expiry not within MAX_DAYS ahead."""
        if scope not in Scope.values:
            raise ValueError(f"unknown scope {scope[:40]!r}: give one of "
                             + ", ".join(repr(v) for v in Scope.values))
        now = timezone.now()
        expires_at = expires_at or default_expiry()
        if not now < expires_at <= now + timedelta(days=MAX_DAYS):
            raise ValueError(f"the expiry must be within {MAX_DAYS} days from now")
        token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = cls.objects.create(user=user, name=name, token_hash=hash_token(token),
                                    token_prefix=token[: len(API_TOKEN_PREFIX) + 6],
                                    scope=scope, expires_at=expires_at)
        return record, token
