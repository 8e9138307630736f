"""Burst requests: a lead asks for GPUs above the contract's base quota for a while; they are
granted when they fit, or wait in a queue."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.wording import said
from loans.models.contracts import Contract

DEFAULT_PRIORITY = 100  # lower is served first; an operator moves a request up or down from here


class BurstRequest(models.Model):
    """N extra GPUs for [starts_at, ends_at), granted at once or queued until they fit."""

    class State(models.TextChoices):
        QUEUED = "queued", _("queued")
        GRANTED = "granted", _("granted")
        REJECTED = "rejected", _("rejected")
        CANCELLED = "cancelled", _("cancelled")
        REVOKED = "revoked", _("revoked")
        EXPIRED = "expired", _("expired")

    contract = models.ForeignKey(
        Contract, verbose_name=_("contract"), on_delete=models.CASCADE, related_name="bursts",
    )
    gpus = models.PositiveIntegerField(_("extra GPUs"))
    starts_at = models.DateTimeField(_("from"))
    ends_at = models.DateTimeField(_("until"))
    reason = models.CharField(_("reason"), max_length=500)
    priority = models.SmallIntegerField(
        _("priority"), default=DEFAULT_PRIORITY,
        help_text=_("Lower is served first (as for attribution rules); equal ones in order."))
    state = models.CharField(_("state"), max_length=10, choices=State.choices,
                             default=State.QUEUED)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                     related_name="+", verbose_name=_("requested by"))
    created_at = models.DateTimeField(_("requested"))
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    note = models.CharField(_("note"), max_length=500, blank=True,
                            help_text=_("Why it was granted, rejected, revoked or cancelled."))
    wording = models.JSONField(
        _("wording"), default=dict, blank=True, editable=False,
        help_text=_("The note's template and facts, rendered in the reader's language; note "
                    "is its English (or what an operator wrote)."))
    submission = models.CharField(
        _("submission"), max_length=64, blank=True, default="", editable=False,
        help_text=_("The key the form or the API's Idempotency-Key header sent with it: the "
                    "same key again gets this request back, not a second one."))
    pool = models.CharField(
        _("pool"), max_length=100, blank=True,
        help_text=_("The GPU model whose pool granted it (for a plan of any model, the pool "
                    "that had most room)."))

    class Meta:
        ordering = ["priority", "created_at", "pk"]
        verbose_name = _("burst request")
        verbose_name_plural = _("burst requests")
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="burst_at_least_one_gpu",
                                   violation_error_message=_("Ask for at least one GPU.")),
            models.CheckConstraint(condition=Q(ends_at__gt=F("starts_at")),
                                   name="burst_ends_after_start",
                                   violation_error_message=_("A burst must end after it starts.")),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "granted", "rejected", "cancelled", "revoked",
                                       "expired"]),
                name="burst_state_known"),
            models.UniqueConstraint(fields=["contract", "submission"],
                                    condition=~Q(submission=""), name="burst_submitted_once"),
        ]
        indexes = [models.Index(fields=["state", "starts_at", "ends_at"], name="burst_window")]

    def __str__(self) -> str:
        return gettext("%(tenant)s +%(gpus)s GPUs %(start)s") % {
            "tenant": self.contract.tenant.slug, "gpus": self.gpus,
            "start": f"{self.starts_at:%Y-%m-%d %H:%M}"}

    @property
    def text(self) -> str:
        """The note in the reader's language."""
        return said(self.wording, self.note)

    @property
    def prioritised(self) -> bool:
        """An operator moved it up or down the queue."""
        return self.priority != DEFAULT_PRIORITY


class BurstEvent(models.Model):
    """Every change of a burst request, kept as its history."""

    request = models.ForeignKey(
        BurstRequest, verbose_name=_("burst request"), on_delete=models.CASCADE,
        related_name="events",
    )
    at = models.DateTimeField(_("at"))
    state = models.CharField(_("state"), max_length=10, choices=BurstRequest.State.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("by"), on_delete=models.SET_NULL, null=True,
        blank=True, related_name="+", help_text=_("Empty when the queue job acted."),
    )
    note = models.CharField(_("note"), max_length=500, blank=True)
    wording = models.JSONField(_("wording"), default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("burst event")
        verbose_name_plural = _("burst events")

    def __str__(self) -> str:
        return f"{self.request_id} {self.state} {self.at:%Y-%m-%d %H:%M}"

    @property
    def text(self) -> str:
        """The note in the reader's language."""
        return said(self.wording, self.note)
