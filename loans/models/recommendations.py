"""Recommendations for a contract, and what its lead decided about them."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.wording import said
from loans.models.contracts import Contract


class Recommendation(models.Model):
    """A better commitment, quota or plan, with its evidence. Accepting one records a request
    for an operator; applying it writes the amendment (loans.services.ledger.amendments)."""

    class Kind(models.TextChoices):
        COMMITMENT = "commitment", _("commitment")
        BASE_QUOTA = "base_quota", _("base quota")
        MAX_QUOTA = "max_quota", _("max quota")
        CONSOLIDATE = "consolidate", _("consolidation")
        PLAN = "plan", _("plan")

    class Confidence(models.TextChoices):
        HIGH = "high", _("high")
        MEDIUM = "medium", _("medium")
        LOW = "low", _("low")

    class State(models.TextChoices):
        OPEN = "open", _("open")
        ACCEPTED = "accepted", _("accepted")
        DISMISSED = "dismissed", _("dismissed")
        SUPERSEDED = "superseded", _("superseded")
        APPLIED = "applied", _("applied")

    contract = models.ForeignKey(
        Contract, verbose_name=_("contract"), on_delete=models.CASCADE,
        related_name="recommendations",
    )
    kind = models.CharField(_("kind"), max_length=12, choices=Kind.choices)
    state = models.CharField(_("state"), max_length=10, choices=State.choices,
                             default=State.OPEN)
    current = models.CharField(_("current"), max_length=120, blank=True)
    recommended = models.CharField(_("recommended"), max_length=120, blank=True)
    expected_saving = models.DecimalField(
        _("expected saving per period"), max_digits=18, decimal_places=4, null=True, blank=True)
    currency = models.CharField(_("currency"), max_length=3, blank=True)
    confidence = models.CharField(_("confidence"), max_length=10, blank=True,
                                  choices=Confidence.choices)
    lookback_days = models.PositiveSmallIntegerField(_("lookback (days)"), null=True, blank=True)
    message = models.TextField(_("message"))
    wording = models.JSONField(
        _("wording"), default=dict, blank=True, editable=False,
        help_text=_("The message's template and facts, rendered in the reader's language; "
                    "message is its English."))
    evidence = models.JSONField(_("evidence"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created"))
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+", verbose_name=_("decided by"))
    applied_at = models.DateTimeField(_("applied"), null=True, blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+", verbose_name=_("applied by"))
    amendment = models.OneToOneField(
        "loans.Amendment", on_delete=models.PROTECT, null=True, blank=True,
        related_name="recommendation", verbose_name=_("amendment"),
        help_text=_("The amendment that applied it."))

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("recommendation")
        verbose_name_plural = _("recommendations")
        constraints = [
            models.UniqueConstraint(
                fields=["contract", "kind"], condition=Q(state="open"),
                name="recommendation_open_once",
                violation_error_message=_("This contract already has an open recommendation "
                                          "of this kind."),
            ),
            models.CheckConstraint(
                condition=Q(state__in=["open", "accepted", "dismissed", "superseded",
                                       "applied"]),
                name="recommendation_state_known"),
        ]

    def __str__(self) -> str:
        return (f"{self.contract} {self.get_kind_display()}: {self.recommended} "
                f"({self.get_state_display()})")

    @property
    def text(self) -> str:
        """The message in the reader's language."""
        return said(self.wording, self.message)
