"""Sharing groups (DESIGN "Sharing a commitment"): contracts of several tenants of one
organisation whose unused committed GPU-hours cover each other's overage at close. Who was in a
group when is kept (a membership row from a period's start until a later period's start); what
each statement lent and borrowed is kept on it, line by line, and what the group paid the
provider on a group statement. Nothing stated is ever rewritten."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from loans.models.contracts import Contract
from loans.models.fields import currency_validator
from loans.models.statements import MONEY_DIGITS, MONEY_PLACES, Statement


class SharingGroup(models.Model):
    """An organisation's contracts that share their commitments: one calendar, one currency."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    currency = models.CharField(_("currency"), max_length=3, validators=[currency_validator])
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("sharing group")
        verbose_name_plural = _("sharing groups")

    def __str__(self) -> str:
        return self.name


class SharingMember(models.Model):
    """A contract in a group from the start of one of its periods (`joins_at`) until the start
    of a later one (`leaves_at`), or the end of the contract (its term, or an early
    termination), whichever comes first: nobody need remove an ended contract. Cancelling
    the contract before its start voids the membership (`voided_at`): kept, never deleted,
    and it shares nothing."""

    group = models.ForeignKey(SharingGroup, verbose_name=_("group"), on_delete=models.PROTECT,
                              related_name="members")
    contract = models.ForeignKey(Contract, verbose_name=_("contract"), on_delete=models.PROTECT,
                                 related_name="sharing")
    joins_at = models.DateTimeField(_("from"), help_text=_("The start of the first period it "
                                                           "shares."))
    leaves_at = models.DateTimeField(_("until"), null=True, blank=True, help_text=_(
        "The start of the first period it no longer shares; empty while it stays."))
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("added by"),
                                 on_delete=models.SET_NULL, null=True, blank=True,
                                 related_name="+")
    removed_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("removed by"),
                                   on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    voided_at = models.DateTimeField(_("void since"), null=True, blank=True, help_text=_(
        "When the contract was cancelled before its start: the membership shares nothing."))
    changed_at = models.DateTimeField(_("changed at"), auto_now=True)

    class Meta:
        ordering = ["group", "joins_at", "contract_id"]
        verbose_name = _("sharing membership")
        verbose_name_plural = _("sharing memberships")
        constraints = [
            models.CheckConstraint(condition=Q(leaves_at__isnull=True)
                                   | Q(leaves_at__gt=F("joins_at")),
                                   name="sharing_member_leaves_after_joining"),
        ]

    def __str__(self) -> str:
        return f"{self.group}: {self.contract}"

    @property
    def ends_at(self):
        """The first instant it no longer shares: its leaving, or the contract's end."""
        end = self.contract.window_end
        return end if self.leaves_at is None else min(self.leaves_at, end)

    @property
    def is_void(self) -> bool:
        return self.voided_at is not None or self.contract.status not in Contract.HOLDING

    def covers(self, instant) -> bool:
        """Whether the contract shares in the group at `instant`: a signed contract, inside
        its membership and its own interval."""
        return not self.is_void and self.joins_at <= instant < self.ends_at

    def ended(self, now) -> bool:
        """Whether it shares no period from `now` on (left, or the contract has ended)."""
        return not self.is_void and self.ends_at <= now


class SharingLine(models.Model):
    """What a period statement lent to or borrowed from one other contract of its group:
    GPU-hours at the lender's committed rate. A borrowed line's amount is billed; a lent
    line's is credited (negative on the statement's total). Written with its statement."""

    class Kind(models.TextChoices):
        LENT = "lent", _("lent")
        BORROWED = "borrowed", _("borrowed")

    statement = models.ForeignKey(Statement, verbose_name=_("statement"),
                                  on_delete=models.PROTECT, related_name="sharing_lines")
    kind = models.CharField(_("kind"), max_length=8, choices=Kind.choices)
    counterpart = models.ForeignKey(Contract, verbose_name=_("counterpart contract"),
                                    on_delete=models.PROTECT, related_name="+")
    group = models.ForeignKey(SharingGroup, verbose_name=_("group"), on_delete=models.PROTECT,
                              related_name="+")
    gpu_hours = models.DecimalField(_("GPU-hours"), max_digits=16, decimal_places=6)
    rate = models.DecimalField(_("rate"), max_digits=12, decimal_places=4,
                               help_text=_("The lender's committed rate."))
    amount = models.DecimalField(_("amount"), max_digits=MONEY_DIGITS,
                                 decimal_places=MONEY_PLACES)

    class Meta:
        ordering = ["statement", "kind", "counterpart"]
        verbose_name = _("sharing line")
        verbose_name_plural = _("sharing lines")
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["lent", "borrowed"]),
                                   name="sharing_line_kind_known"),
            models.CheckConstraint(condition=Q(gpu_hours__gt=0) & Q(amount__gte=0),
                                   name="sharing_line_positive"),
        ]

    def __str__(self) -> str:
        text = (gettext("%(statement)s lent %(hours)s GPU-h to %(other)s")
                if self.kind == self.Kind.LENT
                else gettext("%(statement)s borrowed %(hours)s GPU-h from %(other)s"))
        return text % {"statement": self.statement, "hours": f"{self.gpu_hours:,.2f}",
                       "other": self.counterpart.tenant}

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValidationError(_("A closed statement is never rewritten."))
        super().save(*args, **kwargs)

    @property
    def signed_amount(self):
        return self.amount if self.kind == self.Kind.BORROWED else -self.amount


class GroupStatement(models.Model):
    """What a group paid the provider for one period: every member's commitment plus the
    overage left after sharing, each at its own overage rate; and what sharing saved."""

    group = models.ForeignKey(SharingGroup, verbose_name=_("group"), on_delete=models.PROTECT,
                              related_name="statements")
    period_start = models.DateTimeField(_("period start"))
    period_end = models.DateTimeField(_("period end"))
    member_statements = models.ManyToManyField(Statement, verbose_name=_("member statements"),
                                               related_name="group_statements")
    committed_cost = models.DecimalField(_("committed cost"), max_digits=MONEY_DIGITS,
                                         decimal_places=MONEY_PLACES)
    overage_cost = models.DecimalField(_("overage cost after sharing"),
                                       max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES)
    provider_total = models.DecimalField(_("provider total"), max_digits=MONEY_DIGITS,
                                         decimal_places=MONEY_PLACES)
    saving = models.DecimalField(_("saving"), max_digits=MONEY_DIGITS,
                                 decimal_places=MONEY_PLACES)
    shared_gpu_hours = models.DecimalField(_("GPU-hours shared"), max_digits=16,
                                           decimal_places=6)
    currency = models.CharField(_("currency"), max_length=3)
    closed_at = models.DateTimeField(_("closed at"), auto_now_add=True)

    class Meta:
        ordering = ["group", "period_start"]
        verbose_name = _("group statement")
        verbose_name_plural = _("group statements")
        constraints = [
            models.UniqueConstraint(fields=["group", "period_start"],
                                    name="group_statement_once_per_period"),
        ]

    def __str__(self) -> str:
        return gettext("%(group)s from %(start)s") % {
            "group": self.group, "start": self.period_start.date().isoformat()}

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValidationError(_("A closed statement is never rewritten."))
        super().save(*args, **kwargs)
