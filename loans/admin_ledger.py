"""The ledger in the admin: amendments and terminations written through their service,
statements with the correction lines they carry, all read-only once written."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.admin import ReadOnlyAdmin, ReadOnlyInline
from core.admin_figures import FiguresAdmin, written
from loans.models import Amendment, Contract, CorrectionLine, Statement
from loans.services.ledger import amendments

TERM_FIELDS = {
    "base_quota_gpus": forms.IntegerField(label=_("Base quota (GPUs)"), min_value=0,
                                          required=False),
    "max_quota_gpus": forms.IntegerField(label=_("Max quota (GPUs)"), min_value=1,
                                         required=False),
    "committed_gpu_hours": forms.DecimalField(label=_("Committed GPU-hours per period"),
                                              min_value=0, decimal_places=2, required=False),
    "committed_rate": forms.DecimalField(label=_("Committed rate per GPU-hour"), min_value=0,
                                         decimal_places=4, required=False),
    "overage_rate": forms.DecimalField(label=_("Overage rate per GPU-hour"), min_value=0,
                                       decimal_places=4, required=False),
}


class AmendmentForm(forms.ModelForm):
    """Writes the amendment through loans.services.ledger.amendments when it validates, so the admin
    refuses exactly what the service and the API refuse (a closed period, a term that cannot
    be, a contract that is not active)."""

    terminate = forms.BooleanField(
        label=_("Terminate: end the contract at the end of its current period"), required=False)
    from_number = forms.IntegerField(
        label=_("From period"), min_value=1, required=False,
        help_text=_("The first period the new terms apply to (1 is the first); it must not be "
                    "closed. Not needed to terminate."))
    base_quota_gpus = TERM_FIELDS["base_quota_gpus"]
    max_quota_gpus = TERM_FIELDS["max_quota_gpus"]
    committed_gpu_hours = TERM_FIELDS["committed_gpu_hours"]
    committed_rate = TERM_FIELDS["committed_rate"]
    overage_rate = TERM_FIELDS["overage_rate"]
    author = None  # the operator, set per request by AmendmentAdmin.get_form

    class Meta:
        model = Amendment
        fields = ["contract", "reason"]

    def clean(self) -> dict:
        data = super().clean()
        contract, reason = data.get("contract"), data.get("reason", "")
        if contract is None or self.errors:
            return data
        try:
            if data.get("terminate"):
                self.instance = amendments.terminate(contract=contract, reason=reason,
                                                     author=self.author, now=timezone.now())
            else:
                if not data.get("from_number"):
                    raise ValidationError({"from_number": _("Say from which period.")})
                changes = {name: data[name] for name in TERM_FIELDS
                           if data.get(name) is not None}
                if not changes:
                    raise ValidationError(_("Change at least one term, or terminate."))
                self.instance = amendments.amend(
                    contract=contract, changes=changes, from_period=data["from_number"] - 1,
                    reason=reason, author=self.author, now=timezone.now())
        except ValidationError as error:
            self._errors_from(error)
        return data

    def _errors_from(self, error: ValidationError) -> None:
        fields = {"from_period": "from_number", "changes": None}
        if not hasattr(error, "error_dict"):
            self.add_error(None, error)
            return
        for name, messages in error.message_dict.items():
            target = fields.get(name, name)
            self.add_error(target if target in self.fields else None, messages)


class AmendmentInline(ReadOnlyInline):
    model = Amendment
    fields = ["from_number", "kind", "summary", "reason", "author", "created_at"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description=_("from period"))
    def from_number(self, amendment: Amendment) -> int | None:
        # None on a blank row: a post may claim more rows than the page showed.
        return None if amendment.from_period is None else amendment.from_period + 1


@admin.register(Amendment)
class AmendmentAdmin(FiguresAdmin):
    """Amendments and terminations: written here or through the API, never changed."""

    form = AmendmentForm
    list_display = ["created_at", "contract", "kind", "from_number", "summary", "author"]
    list_filter = ["kind", "contract__tenant"]
    search_fields = ["contract__tenant__slug", "reason"]
    list_select_related = ["contract__tenant", "contract__plan", "author"]
    autocomplete_fields = ["contract"]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.author = request.user
        return form

    def get_fieldsets(self, request, obj=None):
        """Terminating (the contract page's "Terminate early") asks for the contract and why
        only: the term fields belong to an amendment."""
        if request.GET.get("terminate") == "on":
            return [(None, {"fields": ["contract", "terminate", "reason"]})]
        return super().get_fieldsets(request, obj)

    def get_changeform_initial_data(self, request) -> dict:
        initial = super().get_changeform_initial_data(request)
        contract = Contract.objects.filter(pk=initial.get("contract") or None).first()
        if contract is not None:
            initial["from_number"] = amendments.first_open_period(contract, timezone.now()) + 1
        return initial

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        """The form's clean() has written it through the service."""

    @admin.display(description=_("from period"), ordering="from_period")
    def from_number(self, amendment: Amendment) -> int:
        return amendment.from_period + 1


class CorrectionLineInline(ReadOnlyInline):
    model = CorrectionLine
    fk_name = "statement"
    fields = ["period_number", "gpu_hours", "billed_gpu_hours", "overage_rate",
              "overage_before_gpu_hours", "overage_before_cost", "overage_after_gpu_hours",
              "overage_after_cost", "amount"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description=_("period corrected"))
    def period_number(self, line: CorrectionLine) -> int:
        return line.period_index + 1


def _written(field: str, description):
    """A list column showing a statement's `field` as the pages write it, sorted by it."""

    @admin.display(description=description, ordering=field)
    def column(self, statement: Statement) -> str:
        return written(getattr(statement, field), field)

    return column


@admin.register(Statement)
class StatementAdmin(ReadOnlyAdmin):
    """Statements are written by the period-close job and never edited."""

    # Few enough columns that the total and the completeness fit a 1,440 px screen; the kind
    # and the period's end are on each statement's page (and the kind is a filter).
    list_display = [
        "contract", "number", "period_start", "committed", "allocated", "overage",
        "corrections", "total", "complete",
    ]
    list_filter = ["kind", "currency", "contract__tenant"]
    search_fields = ["contract__tenant__slug", "contract__plan__name"]
    list_select_related = ["contract__tenant", "contract__plan"]
    date_hierarchy = "period_start"
    inlines = [CorrectionLineInline]

    shown_as = {"period_index": "number"}  # 1 for the first, as the pages number them

    @admin.display(description=_("period"), ordering="period_index")
    def number(self, statement: Statement) -> int:
        return statement.number

    # As the pages write them (1,234.5 GPU-h, 11,200.00, 99.5%), not as stored (9000.000000).
    committed = _written("committed_gpu_hours", _("committed GPU-hours"))
    allocated = _written("allocated_gpu_hours", _("allocated GPU-hours"))
    overage = _written("overage_gpu_hours", _("overage GPU-hours"))
    corrections = _written("corrections_cost", _("corrections"))
    @admin.display(description=_("total"), ordering="total_cost")
    def total(self, statement: Statement) -> str:
        return f"{written(statement.total_cost, 'total_cost')} {statement.currency}"

    complete = _written("completeness", _("completeness"))

    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj)
