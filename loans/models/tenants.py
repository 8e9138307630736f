"""Tenants (teams) and their members."""

from django.conf import settings
from django.core.validators import URLValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from loans.models.fields import (
    slug_validator,
    split_emails,
    validate_emails,
    validate_webhook_url,
)


class Tenant(models.Model):
    """A team that holds contracts; its members see only its own figures."""

    slug = models.CharField(_("slug"), max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(_("name"), max_length=200)
    alert_emails = models.TextField(
        _("alert e-mails"), blank=True, validators=[validate_emails],
        help_text=_("Addresses told of alerts, one per line or comma-separated."),
    )
    webhook_url = models.URLField(
        _("alert webhook"), blank=True,
        validators=[URLValidator(schemes=["http", "https"]), validate_webhook_url],
        help_text=_("Receives each alert opened or resolved as a JSON POST (retried); "
                    "public addresses only."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = _("tenant")
        verbose_name_plural = _("tenants")

    def __str__(self) -> str:
        return self.name

    def alert_recipients(self) -> list[str]:
        return split_emails(self.alert_emails)


class Membership(models.Model):
    class Role(models.TextChoices):
        LEAD = "lead", _("lead")
        MEMBER = "member", _("member")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE,
        related_name="memberships",
    )
    tenant = models.ForeignKey(
        Tenant, verbose_name=_("tenant"), on_delete=models.CASCADE, related_name="memberships",
    )
    role = models.CharField(_("role"), max_length=10, choices=Role.choices, default=Role.MEMBER)
    # Granted by the directory's groups (loans.services.identity.directory), which adds and
    # removes only these; one an operator made by hand is never touched by a sign-in.
    from_directory = models.BooleanField(
        _("from the directory"), default=False, editable=False,
        help_text=_("Granted by the single sign-on or LDAP groups, and removed with them."))

    class Meta:
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"],
                name="membership_once_per_tenant",
                violation_error_message=_("This user is already a member of this tenant."),
            ),
            models.CheckConstraint(
                condition=Q(role__in=["lead", "member"]), name="membership_role_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant.slug} ({self.get_role_display()})"
