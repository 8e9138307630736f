"""API tokens for people (operators, leads) and the integrations they run.

Like node tokens: random, shown once, stored as a SHA-256 hash. An operator's token reads every
tenant; a lead's reads only their own tenants, exactly as their login would.
"""

import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.bearer import hash_token

API_TOKEN_PREFIX = "gplu_"
LAST_USED_EVERY = 300  # seconds: record use at most this often, not on every request


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    name = models.CharField(_("name"), max_length=100, help_text=_("What uses it, e.g. Grafana."))
    token_hash = models.CharField(_("token hash"), max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(_("token"), max_length=16, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, editable=False)

    class Meta:
        ordering = ["user__username", "name"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @classmethod
    def issue(cls, *, user, name: str) -> tuple["ApiToken", str]:
        """A new token for `user`; returns it in clear, the only time it exists so."""
        token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = cls.objects.create(user=user, name=name, token_hash=hash_token(token),
                                    token_prefix=token[: len(API_TOKEN_PREFIX) + 6])
        return record, token
