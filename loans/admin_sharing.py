"""Sharing groups in the admin: operators create a group, then add and remove contracts
through loans.services.ledger.sharing (from a period not begun; refused with the reason where a
calendar or currency differs), and read each group's members over time and its statements."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.admin import ReadOnlyAdmin, ReadOnlyInline
from core.admin_figures import FiguresAdmin
from loans.models import Contract, GroupStatement, SharingGroup, SharingMember
from loans.services.ledger import sharing


class SharingMemberInline(ReadOnlyInline):
    """Who shared when: kept for good, changed only by the form's add and remove."""

    model = SharingMember
    fields = ["contract", "joins_at", "leaves_at", "voided_at", "added_by", "removed_by"]


class GroupStatementInline(ReadOnlyInline):
    model = GroupStatement
    fields = ["period_start", "period_end", "committed_cost", "overage_cost",
              "provider_total", "saving", "shared_gpu_hours", "currency"]


class SharingGroupForm(forms.ModelForm):
    add_contract = forms.ModelChoiceField(
        label=_("add contract"), required=False,
        queryset=Contract.objects.filter(status__in=Contract.HOLDING).select_related("tenant"),
        help_text=_("It shares from its next period not begun (from its first where it has no "
                    "statement yet). Save a new group first."))
    remove_contract = forms.ModelChoiceField(
        label=_("remove contract"), required=False,
        queryset=Contract.objects.filter(sharing__leaves_at__isnull=True,
                                         sharing__voided_at__isnull=True).select_related(
            "tenant").distinct(),
        help_text=_("It stops sharing from its next period not begun."))

    class Meta:
        model = SharingGroup
        fields = ["name", "currency"]

    def clean(self):
        """Try the change and roll it back, so a refusal shows on the form with its reason."""
        data = super().clean()
        group = self.instance
        for name, change in (("add_contract", sharing.join), ("remove_contract", sharing.leave)):
            contract = data.get(name)
            if contract is None:
                continue
            if group.pk is None:
                self.add_error(name, _("Save the group first, then add its contracts."))
                continue
            try:
                with transaction.atomic():
                    change(group, contract, by=None, now=timezone.now())
                    transaction.set_rollback(True)
            except ValidationError as error:
                self.add_error(name, error)
        return data


@admin.register(SharingGroup)
class SharingGroupAdmin(FiguresAdmin):
    form = SharingGroupForm
    list_display = ["name", "currency", "created_at"]
    search_fields = ["name", "members__contract__tenant__name"]
    inlines = [SharingMemberInline, GroupStatementInline]

    def get_readonly_fields(self, request, obj=None):
        return ["currency"] if obj is not None else []

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        now = timezone.now()
        if contract := form.cleaned_data.get("add_contract"):
            sharing.join(form.instance, contract, by=request.user, now=now)
        if contract := form.cleaned_data.get("remove_contract"):
            member = sharing.leave(form.instance, contract, by=request.user, now=now)
            self.message_user(request, sharing.departure(member, now))


@admin.register(GroupStatement)
class GroupStatementAdmin(ReadOnlyAdmin):
    list_display = ["group", "period_start", "provider_total", "saving", "shared_gpu_hours",
                    "currency"]
    list_filter = ["group"]
    date_hierarchy = "period_start"
