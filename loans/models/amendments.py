"""Amendments: the only way a signed contract's numbers change."""

from dataclasses import replace
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist, ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from loans.maths.billing import Terms
from loans.models.contracts import Contract

INTEGER_TERMS = ("base_quota_gpus", "max_quota_gpus", "term_months")
TEXT_TERMS = ("credit_tiers",)


def term_value(name: str, text: str) -> Decimal | int | str:
    """A term as an amendment stores it (text), back as the value it is."""
    if name in TEXT_TERMS:
        return text
    return int(text) if name in INTEGER_TERMS else Decimal(text)


def _term_label(name: str) -> str:
    try:
        return str(Contract._meta.get_field(name).verbose_name)
    except FieldDoesNotExist:  # a term of an older schema
        return name


class Amendment(models.Model):
    """A dated, signed change of a contract's terms: who, when, why, old -> new, in force from
    the start of period `from_period` (never a closed one). Written once; never updated.

    A termination is an amendment too: it shortens the term so that the contract ends at the
    end of the period it was terminated in (`from_period` is the first period it no longer
    has)."""

    class Kind(models.TextChoices):
        TERMS = "terms", _("terms")
        TERMINATION = "termination", _("termination")

    contract = models.ForeignKey(
        Contract, verbose_name=_("contract"), on_delete=models.PROTECT, related_name="amendments",
    )
    kind = models.CharField(_("kind"), max_length=12, choices=Kind.choices, default=Kind.TERMS)
    from_period = models.PositiveSmallIntegerField(
        _("from period"), help_text=_("Index of the first period it applies to (0 is the first)."))
    changes = models.JSONField(
        _("changes"), help_text=_('{"term": ["old", "new"], ...}, numbers as text.'))
    reason = models.TextField(_("reason"))
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+", verbose_name=_("by"))
    created_at = models.DateTimeField(_("written"), default=timezone.now)

    class Meta:
        ordering = ["contract", "from_period", "created_at", "pk"]
        verbose_name = _("amendment")
        verbose_name_plural = _("amendments")
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["terms", "termination"]),
                                   name="amendment_kind_known"),
            models.CheckConstraint(condition=~Q(reason=""), name="amendment_has_a_reason"),
        ]

    def __str__(self) -> str:
        return gettext("%(contract)s from period %(period)s: %(changes)s") % {
            "contract": self.contract, "period": self.from_period + 1, "changes": self.summary()}

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValidationError(_("An amendment is never rewritten; write another one."))
        super().save(*args, **kwargs)

    def summary(self) -> str:
        """The terms it changes, by their names in the reader's language."""
        return ", ".join(f"{_term_label(name)} {old} → {new}"
                         for name, (old, new) in self.changes.items())

    summary.short_description = _("changes")

    @property
    def from_recommendation(self):
        """The recommendation it applied, if one did (its reason is then said in the reader's
        language, not in the one it was written in)."""
        try:
            return self.recommendation
        except ObjectDoesNotExist:
            return None

    def apply_to(self, terms: Terms) -> Terms:
        """`terms` with this amendment's new values (the term is the contract's own row)."""
        values = {name: term_value(name, new) for name, (_old, new) in self.changes.items()
                  if name in Contract.AMENDABLE}
        return replace(terms, **values)
