
from django.contrib import admin
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from config.admin import ReadOnlyAdmin
from loans import bursts
from loans.models import (
    Alert,
    BurstEvent,
    BurstRequest,
    Contract,
    Membership,
    PendingTask,
    Plan,
    Recommendation,
    Statement,
    Tenant,
)
from loans.summary import current_summary
from loans.tokens import ApiToken
from metering.admin import show_tokens
from metering.models import AttributionRule


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class AttributionRuleInline(admin.TabularInline):
    model = AttributionRule
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name", "memberships__user__username"]
    fieldsets = [
        (None, {"fields": ["slug", "name"]}),
        (_("Alert notifications"), {"fields": ["alert_emails", "webhook_url"]}),
    ]
    inlines = [MembershipInline, AttributionRuleInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__slug", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = [
        "name", "gpu_model", "base_quota_gpus", "max_quota_gpus", "committed_gpu_hours",
        "committed_rate", "overage_rate", "overage_multiplier", "term_months", "currency",
        "is_offered",
    ]
    list_filter = ["is_offered", "currency", "gpu_model", "term_months"]
    search_fields = ["name", "gpu_model", "description"]


@admin.register(Contract)
class ContractAdmin(admin.ModelAdmin):
    list_display = [
        "tenant", "plan", "starts_on", "ends_on", "status", "current_period", "used_of_committed",
        "cost_so_far",
    ]
    list_filter = ["status", "plan", "tenant", "time_zone"]
    search_fields = ["tenant__slug", "tenant__name", "plan__name", "notes"]
    list_select_related = ["tenant", "plan"]
    autocomplete_fields = ["tenant"]
    date_hierarchy = "starts_on"
    readonly_fields = ["ends_on", "current_period", "used_of_committed", "cost_so_far"]
    fieldsets = [
        (None, {"fields": ["tenant", "plan", "starts_on", "ends_on", "time_zone", "status"]}),
        (
            _("Negotiated overrides (empty: the plan's number)"),
            {"fields": list(Contract.OVERRIDES)},
        ),
        (_("Current period"), {"fields": ["current_period", "used_of_committed", "cost_so_far"]}),
        (None, {"fields": ["notes"]}),
    ]

    def _summary(self, contract: Contract):
        # One rollup query per contract row; the list shows at most list_per_page of them.
        cache = getattr(contract, "_summary_cache", None)
        if cache is None:
            cache = contract._summary_cache = (
                current_summary(contract, timezone.now()) if contract.pk else None,
            )
        return cache[0]

    @admin.display(description=_("current period"))
    def current_period(self, contract: Contract) -> str:
        summary = self._summary(contract)
        if summary is None:
            return "-"
        first, last = summary.period.local_dates(contract.zone)
        return f"{summary.period.index + 1}: {first} – {last}"

    @admin.display(description=_("used / committed GPU-h"))
    def used_of_committed(self, contract: Contract) -> str:
        summary = self._summary(contract)
        if summary is None:
            return "-"
        used, committed = summary.used_gpu_hours, summary.committed_gpu_hours
        percent = f" ({used / committed:.0%})" if committed > 0 else ""
        return f"{used:,.1f} / {committed:,.0f}{percent}"

    @admin.display(description=_("cost so far"))
    def cost_so_far(self, contract: Contract) -> str:
        summary = self._summary(contract)
        if summary is None:
            return "-"
        return f"{summary.cost.total:,.2f} {summary.currency}"


@admin.register(Statement)
class StatementAdmin(ReadOnlyAdmin):
    """Statements are written by the period-close job and never edited."""

    list_display = [
        "contract", "period_index", "period_start", "period_end", "committed_gpu_hours",
        "allocated_gpu_hours", "overage_gpu_hours", "total_cost", "currency", "completeness",
    ]
    list_filter = ["currency", "contract__tenant"]
    search_fields = ["contract__tenant__slug", "contract__plan__name"]
    list_select_related = ["contract__tenant", "contract__plan"]
    date_hierarchy = "period_start"


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    """Alerts are opened and resolved by the alert job; this is their history."""

    list_display = ["opened_at", "kind", "tenant", "subject", "state", "resolved_at", "message"]
    list_filter = ["state", "kind", "tenant"]
    search_fields = ["subject", "message", "tenant__slug"]
    list_select_related = ["tenant"]
    date_hierarchy = "opened_at"


@admin.register(Recommendation)
class RecommendationAdmin(admin.ModelAdmin):
    """What the jobs advise and what leads decided; accepted ones wait for an operator to
    change the contract, then to mark them applied."""

    list_display = ["created_at", "contract", "kind", "current", "recommended",
                    "expected_saving", "confidence", "state", "decided_by", "decided_at"]
    list_filter = ["state", "kind", "confidence"]
    search_fields = ["contract__tenant__slug", "message"]
    list_select_related = ["contract__tenant", "contract__plan", "decided_by"]
    readonly_fields = [f.name for f in Recommendation._meta.fields if f.name != "state"]
    actions = ["mark_applied"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description=_("Mark the accepted ones as applied"))
    def mark_applied(self, request, queryset) -> None:
        count = queryset.filter(state=Recommendation.State.ACCEPTED).update(
            state=Recommendation.State.APPLIED)
        self.message_user(request, _("%(count)s marked as applied.") % {"count": count})


class BurstEventInline(admin.TabularInline):
    model = BurstEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "state", "actor", "note"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(BurstRequest)
class BurstRequestAdmin(admin.ModelAdmin):
    """Burst requests and their history; decide with the actions (they go through the same
    checks and notifications as the API)."""

    list_display = ["created_at", "contract", "gpus", "starts_at", "ends_at", "priority",
                    "state", "note"]
    list_filter = ["state", "contract__tenant"]
    list_select_related = ["contract__tenant", "contract__plan"]
    readonly_fields = [f.name for f in BurstRequest._meta.fields]
    inlines = [BurstEventInline]
    actions = ["approve", "reject", "revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    def _decide(self, request, queryset, what: str) -> None:
        done, refused = 0, []
        for burst in queryset:
            try:
                bursts.decide(burst, what, actor=request.user, now=timezone.now(),
                              note=_("by an operator in the admin"))
                done += 1
            except bursts.BurstError as error:
                refused.append(f"#{burst.pk}: {error}")
        self.message_user(request, _("%(count)s done.") % {"count": done})
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


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Personal API tokens: issued here, shown once, stored hashed; delete one to revoke it."""

    list_display = ["name", "user", "token_prefix", "created_at", "last_used_at"]
    list_filter = ["user__is_staff"]
    search_fields = ["name", "user__username", "token_prefix"]
    autocomplete_fields = ["user"]
    fields = ["user", "name"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        record, token = ApiToken.issue(user=obj.user, name=obj.name)
        obj.pk, obj._token = record.pk, token

    def response_add(self, request, obj, post_url_continue=None):
        return show_tokens(self, request, [(obj, obj._token)], "admin/loans/apitoken/tokens.html")


@admin.register(PendingTask)
class PendingTaskAdmin(ReadOnlyAdmin):
    """Jobs that waited for a broker that was down; flush_outbox queues them every minute."""

    list_display = ["task", "created_at", "attempts", "last_error"]
