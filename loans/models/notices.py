"""Who is told what, where and when: chat channels (Apprise URLs) beside e-mail, each person's
choice per alert kind (at once, in the daily or weekly digest, or not at all), the kinds
operators make required, and the outbox of notices still to send or sent once."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from loans.models.alerts import Alert
from loans.models.statements import Statement
from loans.models.tenants import Tenant


class Channel(models.Model):
    """A chat channel (Slack, Microsoft Teams, Feishu/Lark, DingTalk, WeCom...) that hears a
    tenant's alerts at once, or the operators' where no tenant is set. The URL holds the
    channel's secret: it is kept for delivery and never shown again; pages show `shown`,
    Apprise's own rendering with the secret parts masked."""

    tenant = models.ForeignKey(
        Tenant, verbose_name=_("tenant"), on_delete=models.CASCADE, null=True, blank=True,
        related_name="channels",
        help_text=_("Empty for the operators' own channel (alerts no tenant owns)."))
    name = models.CharField(_("name"), max_length=100)
    url = models.TextField(_("Apprise URL"), editable=False)
    service = models.CharField(_("service"), max_length=60, editable=False)
    shown = models.CharField(_("URL, secrets masked"), max_length=500, editable=False)
    language = models.CharField(_("language"), max_length=10, choices=settings.LANGUAGES,
                                default=settings.LANGUAGE_CODE)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("added by"),
                                   on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(_("added"), auto_now_add=True)
    failing_since = models.DateTimeField(_("failing since"), null=True, blank=True,
                                         editable=False)
    last_error = models.CharField(_("last error"), max_length=300, blank=True, editable=False)

    class Meta:
        ordering = ["tenant_id", "name", "pk"]
        verbose_name = _("chat channel")
        verbose_name_plural = _("chat channels")

    def __str__(self) -> str:
        return f"{self.name} ({self.service})"


class Timing(models.TextChoices):
    NOW = "now", _("at once")
    DAILY = "daily", _("in the daily digest")
    WEEKLY = "weekly", _("in the weekly digest")
    NEVER = "never", _("not at all")


# What a person chooses beside the alert kinds: the weekly digest itself, and closed statements.
DIGEST, STATEMENT = "digest", "statement"


class NoticeProfile(models.Model):
    """One person's choices: the language messages are written in, and per kind when to be
    told (`timings`: kind -> Timing; a kind not named is at once, the digest weekly)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, verbose_name=_("user"),
                                on_delete=models.CASCADE, related_name="notice_profile")
    language = models.CharField(_("language"), max_length=10, choices=settings.LANGUAGES,
                                default=settings.LANGUAGE_CODE)
    timings = models.JSONField(_("when to be told"), default=dict, blank=True)

    class Meta:
        verbose_name = _("notification choices")
        verbose_name_plural = _("notification choices")

    def __str__(self) -> str:
        return str(self.user)


class RequiredAlert(models.Model):
    """An alert kind operators made required: a lead may take it in a digest, never turn it
    off."""

    kind = models.CharField(_("kind"), max_length=24, choices=Alert.Kind.choices, unique=True)

    class Meta:
        ordering = ["kind"]
        verbose_name = _("required alert")
        verbose_name_plural = _("required alerts")

    def __str__(self) -> str:
        return self.get_kind_display()


class Notice(models.Model):
    """One message to one person (by e-mail) or one channel, kept until sent and after: `key`
    is unique, so an alert's event, a digest or a statement is told to each once, whatever
    restarts or retries happen. A notice waiting for a digest is `folded` into it when the
    digest is written, and counts as sent with it."""

    class Kind(models.TextChoices):
        ALERT = "alert", _("alert")
        DIGEST = "digest", _("digest")
        STATEMENT = "statement", _("statement")

    key = models.CharField(_("key"), max_length=200, unique=True)
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("person"),
                             on_delete=models.CASCADE, null=True, blank=True,
                             related_name="notices")
    channel = models.ForeignKey(Channel, verbose_name=_("channel"), on_delete=models.CASCADE,
                                null=True, blank=True, related_name="notices")
    alert = models.ForeignKey(Alert, verbose_name=_("alert"), on_delete=models.CASCADE,
                              null=True, blank=True, related_name="notices")
    statement = models.ForeignKey(Statement, verbose_name=_("statement"),
                                  on_delete=models.CASCADE, null=True, blank=True,
                                  related_name="notices")
    event = models.CharField(_("event"), max_length=20, blank=True,
                             help_text=_("opened or resolved; daily or weekly for a digest."))
    timing = models.CharField(_("when"), max_length=10, choices=Timing.choices,
                              default=Timing.NOW)
    folded_into = models.ForeignKey("self", verbose_name=_("told in digest"),
                                    on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="folded")
    created_at = models.DateTimeField(_("created"))
    next_attempt_at = models.DateTimeField(_("next attempt"), null=True, blank=True)
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    last_error = models.CharField(_("last error"), max_length=300, blank=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        verbose_name = _("notice")
        verbose_name_plural = _("notices")
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, channel__isnull=True)
                | Q(user__isnull=True, channel__isnull=False),
                name="notice_one_recipient"),
        ]
        indexes = [models.Index(fields=["sent_at", "next_attempt_at"],
                                name="notice_due")]

    def __str__(self) -> str:
        return self.key
