
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from core.admin import DatedAdmin, ReadOnlyAdmin, ReadOnlyInline
from core.admin_figures import FiguresAdmin, FiguresInline, written
from loans import (
    admin_guarantee,  # noqa: F401 - registers the contracts' holds
    admin_notices,  # noqa: F401 - registers the channels and notices
    admin_sharing,  # noqa: F401 - registers the sharing groups' pages
)
from loans.admin_ledger import AmendmentInline
from loans.maths import billing
from loans.models import (
    Alert,
    ApiToken,
    BurstEvent,
    BurstRequest,
    Contract,
    DirectoryAccount,
    Membership,
    OveragePolicy,
    PendingTask,
    Plan,
    Recommendation,
    SlurmAccountHold,
    SlurmLimitChange,
    Tenant,
)
from loans.services import bursts, fleet_status
from loans.services.alerts import conditions as alerts
from loans.services.ledger import read as ledgers
from loans.services.ledger.amendments import apply_recommendation
from metering.admin import show_tokens
from metering.models import AttributionRule


class MembershipInline(FiguresInline, admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class AttributionRuleInline(FiguresInline, admin.TabularInline):
    model = AttributionRule
    extra = 0
    fields = ["field", "value", "cluster", "priority"]


@admin.register(Tenant)
class TenantAdmin(FiguresAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name", "memberships__user__username"]
    fieldsets = [
        (None, {"fields": ["slug", "name"]}),
        (_("Alert notifications"), {"fields": ["alert_emails", "webhook_url"]}),
    ]
    inlines = [MembershipInline, AttributionRuleInline]


@admin.register(Membership)
class MembershipAdmin(FiguresAdmin):
    list_display = ["user", "tenant", "role", "from_directory"]
    list_filter = ["role", "from_directory", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__slug", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]


@admin.register(Plan)
class PlanAdmin(FiguresAdmin):
    list_display = [
        "name", "gpu_model", "base_quota_gpus", "max_quota_gpus", "committed_gpu_hours",
        "committed_rate", "overage_applied", "term_months", "guarantee_pct", "credit_tiers",
        "currency", "is_offered",
    ]

    @admin.display(description=_("overage rate applied"))
    def overage_applied(self, plan: Plan) -> str:
        """The one rate that applies, and why: the explicit rate where there is one (the
        multiplier is then ignored), else the committed rate times the multiplier."""
        rate = billing.overage_rate(plan.committed_rate, plan.overage_rate,
                                   plan.overage_multiplier)
        if plan.overage_rate is not None:
            return _("%(rate)s (the rate given)") % {"rate": written(rate, "overage_rate")}
        multiplier = plan.overage_multiplier or billing.DEFAULT_OVERAGE_MULTIPLIER
        return _("%(rate)s (%(committed)s × %(multiplier)s)") % {
            "rate": written(rate, "overage_rate"),
            "committed": written(plan.committed_rate, "committed_rate"),
            "multiplier": written(multiplier, "overage_multiplier")}
    list_filter = ["is_offered", "currency", "gpu_model", "term_months"]
    search_fields = ["name", "gpu_model", "description"]


class OveragePolicyInline(admin.TabularInline):
    """The contract's overage policies, newest first: an operator adds one (in force from
    now, as theirs); those set before are its history and stay as they were."""

    model = OveragePolicy
    fields = ["kind", "budget", "set_by", "set_at"]
    readonly_fields = ["set_by", "set_at"]
    extra = 0
    verbose_name = _("overage policy")
    verbose_name_plural = _("Overage policy (the newest is in force)")

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Contract)
class ContractAdmin(DatedAdmin):
    list_display = [
        "tenant", "plan", "starts_on", "ends_on", "status", "current_period", "used_of_committed",
        "cost_so_far",
    ]
    list_filter = ["status", "plan", "tenant", "time_zone"]
    search_fields = ["tenant__slug", "tenant__name", "plan__name", "notes"]
    list_select_related = ["tenant", "plan"]
    autocomplete_fields = ["tenant"]
    date_hierarchy = "starts_on"
    readonly_fields = ["ends_on", "window_start", "window_end", "signed_at", "current_period",
                       "used_of_committed", "cost_so_far", "ledger_links"]
    inlines = [AmendmentInline, OveragePolicyInline]
    fieldsets = [
        (None, {"fields": ["ledger_links", "tenant", "plan", "starts_on", "ends_on", "time_zone",
                           "status", "window_start", "window_end"]}),
        (
            _("Terms: negotiated overrides (empty: the plan's number), fixed at signing"),
            {"fields": [*Contract.OVERRIDES, "signed_at", "currency", "gpu_model"]},
        ),
        (_("Current period"), {"fields": ["current_period", "used_of_committed", "cost_so_far"]}),
        (None, {"fields": ["notes"]}),
    ]

    @admin.display(description=_("Amend, terminate, statements"))
    def ledger_links(self, contract: Contract) -> str:
        """Where a signed contract changes (an amendment or a termination, written through the
        ledger's service) and its statements."""
        if contract.pk is None or contract.status not in Contract.HOLDING:
            return "–"
        add = reverse("admin:loans_amendment_add")
        return format_html(
            '<a class="button" href="{}?contract={}">{}</a> '
            '<a class="button" href="{}?contract={}&amp;terminate=on">{}</a> '
            '<a href="{}?contract__id__exact={}">{}</a>',
            add, contract.pk, _("Amend the terms"), add, contract.pk, _("Terminate early"),
            reverse("admin:loans_statement_changelist"), contract.pk, _("Statements"))

    def get_inline_instances(self, request, obj=None):
        """A new contract has no policy to show yet (allow, until one is set)."""
        return [inline for inline in super().get_inline_instances(request, obj)
                if obj is not None or not isinstance(inline, OveragePolicyInline)]

    def has_delete_permission(self, request, obj=None) -> bool:
        """A signed contract is never deleted (its statements and usage refer to it): it ends,
        or an amendment terminates it. A draft may go."""
        if obj is not None and obj.status in Contract.HOLDING:
            return False
        return super().has_delete_permission(request, obj)

    def save_formset(self, request, form, formset, change) -> None:
        """A new overage policy is the operator's, from now."""
        if formset.model is not OveragePolicy:
            super().save_formset(request, form, formset, change)
            return
        for policy in formset.save(commit=False):
            policy.set_by, policy.set_at = request.user, timezone.now()
            policy.save()
            # The contract's alerts speak of the policy in force: changed at once.
            alerts.refresh_contract_alerts(form.instance, policy.set_at)

    def save_model(self, request, obj: Contract, form, change) -> None:
        super().save_model(request, obj, form, change)
        if obj.status in Contract.HOLDING:
            for other, hours in obj.near_misses():
                self.message_user(request, _(
                    "%(hours).0f hours between this contract and %(other)s are covered by "
                    "neither, so their usage is billed by neither (the zones differ: %(zone)s "
                    "and %(other_zone)s).") % {"hours": hours, "other": other,
                                              "zone": obj.time_zone,
                                              "other_zone": other.time_zone},
                    level="warning")
            self._warn_past_capacity(request, obj)

    def _warn_past_capacity(self, request, contract: Contract) -> None:
        """A contract may promise more than the fleet holds (the GPUs may be on order), but the
        operator should know: guarantees past the pool's GPUs cannot all be met at once."""
        by_model, whole = fleet_status.capacity(timezone.now())
        rows = [c for c in by_model if c.model == contract.gpu_model] if contract.gpu_model \
            else [whole]
        for row in rows:
            if row.guaranteed_gpus > row.physical_gpus:
                self.message_user(request, _(
                    "Base quotas now guarantee %(guaranteed)s %(model)s GPUs, more than the "
                    "%(physical)s that reported in the capacity window: not every guarantee "
                    "can be met at once.") % {
                    "guaranteed": row.guaranteed_gpus, "physical": f"{row.physical_gpus:g}",
                    "model": row.model or _("(any model)")}, level="warning")

    def get_readonly_fields(self, request, obj: Contract | None = None) -> list[str]:
        """A signed contract's terms change by amendment (the inline links to it); its start,
        zone and term are fixed once it has a statement."""
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.status == Contract.Status.ACTIVE \
                and obj.window_start <= timezone.now():
            # A running contract ends by termination ("Terminate early"), not by its status.
            fields.append("status")
        if obj is not None and obj.is_signed:
            fields += [f for f in (*Contract.OVERRIDES, "currency", "gpu_model", "plan",
                                   "tenant") if f not in fields]
            if obj.statements.exists():
                fields += ["starts_on", "time_zone"]
        else:
            fields += ["currency", "gpu_model"]
        return fields

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("amendments")

    def get_changelist_instance(self, request):
        """The list's current periods read in one go (ledgers.period_entries), not a ledger
        read per row."""
        changelist = super().get_changelist_instance(request)
        now = timezone.now()
        pairs = [(c, c.period_at(now)) for c in changelist.result_list]
        pairs = [(c, period) for c, period in pairs if period is not None]
        entries = ledgers.period_entries(pairs, now)
        for contract in changelist.result_list:
            contract._current_cache = (entries.get(contract.pk),)
        return changelist

    def _current(self, contract: Contract) -> ledgers.PeriodEntry | None:
        # The ledger's reading of the current period, once per row (the list sets them all
        # at once, above).
        cache = getattr(contract, "_current_cache", None)
        if cache is None:
            cache = contract._current_cache = (
                ledgers.read(contract, timezone.now()).current if contract.pk else None,)
        return cache[0]

    @admin.display(description=_("current period"))
    def current_period(self, contract: Contract) -> str:
        entry = self._current(contract)
        if entry is None:
            return "-"
        first, last = entry.period.local_dates(contract.zone)
        return f"{entry.period.index + 1}: {first} – {last}"

    @admin.display(description=_("used / committed GPU-h"))
    def used_of_committed(self, contract: Contract) -> str:
        entry = self._current(contract)
        if entry is None:
            return "-"
        used, committed = entry.used_gpu_hours, entry.committed_gpu_hours
        percent = f" ({used / committed:.0%})" if committed > 0 else ""
        return f"{used:,.1f} / {committed:,.0f}{percent}"

    @admin.display(description=_("cost so far"))
    def cost_so_far(self, contract: Contract) -> str:
        entry = self._current(contract)
        if entry is None:
            return "-"
        return f"{entry.cost.total:,.2f} {entry.terms.currency}"


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    """Alerts are opened and resolved by the alert job; this is their history."""

    list_display = ["opened_at", "kind", "tenant", "subject", "state", "resolved_at", "said"]
    list_filter = ["state", "kind", "tenant"]
    search_fields = ["subject", "message", "tenant__slug"]
    list_select_related = ["tenant"]
    date_hierarchy = "opened_at"

    @admin.display(description=_("message"))
    def said(self, alert: Alert) -> str:
        return alert.text  # in the operator's language; searches match its English


@admin.register(Recommendation)
class RecommendationAdmin(FiguresAdmin):
    """What the jobs advise and what leads decided; an operator applies the accepted ones,
    which writes the amendment."""

    list_display = ["created_at", "contract", "kind", "current", "recommended",
                    "expected_saving", "confidence", "state", "decided_by", "decided_at"]
    list_filter = ["state", "kind", "confidence"]
    search_fields = ["contract__tenant__slug", "message"]
    list_select_related = ["contract__tenant", "contract__plan", "decided_by"]
    readonly_fields = [f.name for f in Recommendation._meta.fields if f.name != "state"]
    actions = ["apply"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description=_("Apply the accepted ones (an amendment from the next period)"))
    def apply(self, request, queryset) -> None:
        done = 0
        for rec in queryset.filter(state=Recommendation.State.ACCEPTED):
            try:
                apply_recommendation(recommendation=rec, author=request.user, now=timezone.now())
                done += 1
            except ValidationError as error:
                self.message_user(request, f"#{rec.pk}: {' '.join(error.messages)}",
                                  level="warning")
        self.message_user(request, _("%(count)s applied.") % {"count": done})


class BurstEventInline(ReadOnlyInline):
    model = BurstEvent
    fields = ["at", "state", "actor", "said"]

    @admin.display(description=_("note"))
    def said(self, event: BurstEvent) -> str:
        return event.text


DONE_WORDS = {"approve": _("granted"), "reject": _("rejected"),
              "revoke": _("revoked")}


@admin.register(BurstRequest)
class BurstRequestAdmin(FiguresAdmin):
    """Burst requests and their history; decide with the actions (they go through the same
    checks and notifications as the API)."""

    list_display = ["created_at", "contract", "gpus", "starts_at", "ends_at", "priority",
                    "state", "said"]
    list_filter = ["state", "contract__tenant"]
    list_select_related = ["contract__tenant", "contract__plan"]
    readonly_fields = [f.name for f in BurstRequest._meta.fields]
    inlines = [BurstEventInline]
    actions = ["approve", "reject", "revoke"]

    @admin.display(description=_("note"))
    def said(self, request: BurstRequest) -> str:
        return request.text  # in the operator's language

    def has_add_permission(self, request) -> bool:
        return False

    def _decide(self, request, queryset, what: str) -> None:
        """Each request decided as the page and the API decide it; the message says which
        were and why the others were not."""
        done, refused = [], []
        for burst in queryset:
            try:
                bursts.decide(burst, what, actor=request.user, now=timezone.now(),
                              note=_("by an operator in the admin"))
                done.append(burst.pk)
            except bursts.BurstError as error:
                refused.append(f"#{burst.pk}: {error}")
        if done:
            self.message_user(request, _("%(count)s %(action)s: %(ids)s.") % {
                "count": len(done), "action": DONE_WORDS[what],
                "ids": ", ".join(f"#{pk}" for pk in done)})
        for line in refused:
            self.message_user(request, line, level="warning")

    @admin.action(description=_("Approve (grant within the max quota)"))
    def approve(self, request, queryset) -> None:
        self._decide(request, queryset, "approve")

    @admin.action(description=_("Reject"))
    def reject(self, request, queryset) -> None:
        self._decide(request, queryset, "reject")

    @admin.action(description=_("Revoke the grant"))
    def revoke(self, request, queryset) -> None:
        self._decide(request, queryset, "revoke")


@admin.register(DirectoryAccount)
class DirectoryAccountAdmin(ReadOnlyAdmin):
    """Who signed in with the organisation's identity, and what its groups gave (kept by the
    sign-ins, not edited here)."""

    list_display = ["user", "source", "subject", "operator_from_directory", "seen_at"]
    list_filter = ["source", "operator_from_directory"]
    search_fields = ["user__username", "subject"]
    list_select_related = ["user"]


@admin.register(ApiToken)
class ApiTokenAdmin(FiguresAdmin):
    """Personal API tokens: issued here, shown once, stored hashed; delete one to revoke it."""

    list_display = ["name", "user", "token_prefix", "scope", "created_at", "last_used_at",
                    "expires_at"]
    list_filter = ["scope", "user__is_staff"]
    search_fields = ["name", "user__username", "token_prefix"]
    autocomplete_fields = ["user"]
    fields = ["user", "name", "scope", "expires_at"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        record, token = ApiToken.issue(user=obj.user, name=obj.name, scope=obj.scope,
                                       expires_at=obj.expires_at)
        obj.pk, obj._token = record.pk, token

    def response_add(self, request, obj, post_url_continue=None):
        return show_tokens(self, request, [(obj, obj._token)], "admin/loans/apitoken/tokens.html")


@admin.register(SlurmLimitChange)
class SlurmLimitChangeAdmin(ReadOnlyAdmin):
    """What apply_quotas --slurm changed in Slurm, and what sacctmgr said."""

    list_display = ["at", "cluster", "account", "tenant", "change", "succeeded"]
    list_filter = ["succeeded", "cluster", "tenant"]
    search_fields = ["account", "change", "command"]
    list_select_related = ["tenant"]
    date_hierarchy = "at"


@admin.register(SlurmAccountHold)
class SlurmAccountHoldAdmin(ReadOnlyAdmin):
    """Accounts whose GPU limit a running contract sets, with the limit each had before
    (restored when no contract runs)."""

    list_display = ["cluster", "account", "set_gpus", "hand_set_gpus", "since"]
    list_filter = ["cluster"]
    search_fields = ["account"]


@admin.register(PendingTask)
class PendingTaskAdmin(ReadOnlyAdmin):
    """Jobs that waited for a broker that was down; flush_outbox queues them every minute."""

    list_display = ["task", "created_at", "attempts", "last_error"]
