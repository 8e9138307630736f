"""People who log in with the organisation's identity (OpenID Connect, LDAP): who they are at
the provider, and whether the operators group was granted by its groups."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class DirectoryAccount(models.Model):
    class Source(models.TextChoices):
        OIDC = "oidc", _("single sign-on (OpenID Connect)")
        LDAP = "ldap", _("LDAP directory")

    user = models.OneToOneField(settings.AUTH_USER_MODEL, verbose_name=_("user"),
                                on_delete=models.CASCADE, related_name="directory_account")
    source = models.CharField(_("source"), max_length=10, choices=Source.choices)
    subject = models.CharField(_("subject"), max_length=255,
                               help_text=_("The person's id at the provider (OIDC's sub, the "
                                           "LDAP entry's DN)."))
    # The operators group came from the directory's groups (and leaves with them).
    operator_from_directory = models.BooleanField(_("operator by the directory"),
                                                  default=False)
    groups = models.JSONField(_("groups at the last sign-in"), default=list, blank=True)
    seen_at = models.DateTimeField(_("last signed in"), null=True, blank=True)

    class Meta:
        verbose_name = _("directory account")
        verbose_name_plural = _("directory accounts")
        constraints = [models.UniqueConstraint(fields=["source", "subject"],
                                               name="directory_account_once")]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_source_display()})"
