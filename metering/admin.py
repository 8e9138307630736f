from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.admin import DatedAdmin, ReadOnlyAdmin, ReadOnlyInline
from core.admin_figures import FiguresAdmin
from metering.intake.ingest import forget_gpus
from metering.models import (
    AttributionRule,
    Cluster,
    DeviceRefusal,
    Gpu,
    GpuHour,
    GpuTenure,
    JobWait,
    Node,
    Reattribution,
    TenantHour,
)
from metering.services import gpu_move, reattribute


class HasTokenFilter(admin.SimpleListFilter):
    title = _("token")
    parameter_name = "token"

    def lookups(self, request, model_admin):
        return [("yes", _("issued")), ("no", _("none or revoked"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(token_hash__isnull=False)
        if self.value() == "no":
            return queryset.filter(token_hash__isnull=True)
        return queryset


@admin.register(Node)
class NodeAdmin(FiguresAdmin):
    """Tokens are shown once, on the page that issued them, and stored only as a hash."""

    list_display = [
        "name", "cluster", "default_tenant", "token_status", "gpu_count", "max_devices",
        "last_seen_at", "agent_version",
    ]
    list_filter = [HasTokenFilter, "cluster", "default_tenant", "agent_version"]
    search_fields = ["name", "agent_version", "default_tenant__slug", "cluster__name"]
    list_select_related = ["cluster", "default_tenant"]
    readonly_fields = [
        "token_status", "token_issued_at", "last_seen_at", "agent_version", "created_at",
    ]
    actions = ["rotate_tokens", "revoke_tokens"]
    change_form_template = "admin/metering/node/change_form.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(gpu_total=Count("gpus"))

    @admin.display(description=_("GPUs"), ordering="gpu_total")
    def gpu_count(self, node: Node) -> int:
        return getattr(node, "gpu_total", 0)

    @admin.display(description=_("token"))
    def token_status(self, node: Node) -> str:
        return f"{node.token_prefix}…" if node.has_token else _("none (revoked or never issued)")

    def get_urls(self):
        own = [
            path(
                "<int:node_id>/token/<str:action>/",
                self.admin_site.admin_view(self.token_view),
                name="metering_node_token",
            ),
        ]
        return own + super().get_urls()

    def response_add(self, request, obj, post_url_continue=None):
        return self._show_tokens(request, [(obj, obj.issue_token())], replaced=False)

    @admin.action(description=_("Issue new tokens (the old ones stop working)"))
    def rotate_tokens(self, request, queryset):
        nodes = list(queryset)
        replaced = any(node.has_token for node in nodes)
        return self._show_tokens(request, [(node, node.issue_token()) for node in nodes],
                                 replaced=replaced)

    @admin.action(description=_("Revoke tokens"))
    def revoke_tokens(self, request, queryset):
        for node in queryset:
            node.revoke_token()
        count = len(queryset)
        self.message_user(
            request,
            ngettext("Revoked the token of %d node.", "Revoked the tokens of %d nodes.", count)
            % count,
            messages.SUCCESS,
        )

    def token_view(self, request: HttpRequest, node_id: int, action: str) -> HttpResponse:
        node = get_object_or_404(Node, pk=node_id)
        if action not in ("rotate", "revoke") or not self.has_change_permission(request, node):
            return redirect("admin:metering_node_changelist")
        if request.method == "GET":
            context = {**self.admin_site.each_context(request), "node": node, "action": action,
                       "opts": self.model._meta, "title": _("Confirm")}
            return TemplateResponse(request, "admin/metering/node/token_confirm.html", context)
        if request.method != "POST":
            return HttpResponseNotAllowed(["GET", "POST"])
        if action == "rotate":
            replaced = node.has_token
            return self._show_tokens(request, [(node, node.issue_token())], replaced=replaced)
        node.revoke_token()
        self.message_user(request, _("The token of %s is revoked.") % node.name, messages.SUCCESS)
        return redirect(reverse("admin:metering_node_change", args=[node.pk]))

    def _show_tokens(self, request: HttpRequest, issued: list[tuple[Node, str]], *,
                     replaced: bool) -> HttpResponse:
        return show_tokens(self, request, issued, "admin/metering/node/tokens.html",
                           replaced=replaced)


def show_tokens(model_admin, request: HttpRequest, issued: list, template: str, *,
                replaced: bool = False) -> HttpResponse:
    """The page that shows new tokens, once; never cached, never put in a message cookie.
    `replaced`: some of them took the place of a token that now stops working (a first
    token replaces nothing)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "issued": issued, "replaced": replaced,
        "opts": model_admin.model._meta,
        "title": _("New tokens"),
        "server": request.build_absolute_uri("/").rstrip("/"),
    }
    response = TemplateResponse(request, template, context)
    add_never_cache_headers(response)
    return response


class TenureInline(ReadOnlyInline):
    """Which node reported the device's samples when: kept by ingestion, never edited."""

    model = GpuTenure
    fields = ["node", "since", "until"]


class MoveForm(admin.helpers.ActionForm):
    node = forms.ModelChoiceField(Node.objects.all(), required=False, label=_("to node"))


@admin.register(Gpu)
class GpuAdmin(FiguresAdmin):
    list_display = ["uuid", "node", "index", "model", "share", "physical", "memory_total_mib",
                    "last_seen_at"]
    list_filter = ["model", "node"]
    search_fields = ["uuid", "node__name", "model"]
    list_select_related = ["node", "physical"]
    # Registered and moved by the samples that name it (a move keeps the tenures right); into
    # another cluster only by the move action.
    readonly_fields = ["uuid", "node", "physical", "share", "first_seen_at", "last_seen_at"]
    inlines = [TenureInline]
    action_form = MoveForm
    actions = ["move_to_node"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description=_("Move to the node chosen (with its MIG instances and replicas)"),
                  permissions=["change"])
    def move_to_node(self, request: HttpRequest, queryset) -> None:
        try:
            node = MoveForm.base_fields["node"].clean(request.POST.get("node"))
        except ValidationError:
            node = None
        if node is None:
            self.message_user(request, _("Choose the node the GPUs are on now."),
                              messages.ERROR)
            return
        moved = sum(gpu_move(gpu=gpu, node=node, now=timezone.now()) for gpu in queryset)
        forget_gpus()
        self.message_user(request, ngettext(
            "%(count)d device moved to %(node)s.", "%(count)d devices moved to %(node)s.",
            moved) % {"count": moved, "node": node.name}, messages.SUCCESS)


@admin.register(DeviceRefusal)
class DeviceRefusalAdmin(ReadOnlyAdmin):
    """Devices whose samples a node was refused, and why (what the device_refused alerts
    tell operators of)."""

    list_display = ["node", "reason", "devices", "gpu_uuid", "holder", "samples", "first_at",
                    "last_at"]
    list_filter = ["reason", "node"]
    search_fields = ["gpu_uuid", "node__name"]
    list_select_related = ["node", "holder"]
    date_hierarchy = "last_at"


@admin.register(Cluster)
class ClusterAdmin(FiguresAdmin):
    """Every node belongs to a cluster; owner rules hold within one."""

    list_display = ["name", "kind", "node_count", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "description"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(node_total=Count("nodes"))

    @admin.display(description=_("nodes"), ordering="node_total")
    def node_count(self, cluster: Cluster) -> int:
        return getattr(cluster, "node_total", 0)


@admin.register(JobWait)
class JobWaitAdmin(ReadOnlyAdmin):
    """Jobs that waited for GPUs as each scheduler recorded them: what the floor's measure
    reads (docs/guarantee.md)."""

    list_display = ["name", "cluster", "scheduler", "tenant", "gpus", "gpu_type", "submitted",
                    "eligible", "started", "ended", "reason", "capacity"]
    list_filter = ["scheduler", "capacity", "cluster", "tenant"]
    search_fields = ["name", "account", "user", "namespace", "tenant__slug"]
    list_select_related = ["cluster", "tenant"]
    date_hierarchy = "submitted"


@admin.register(AttributionRule)
class AttributionRuleAdmin(FiguresAdmin):
    list_display = ["field", "value", "cluster", "tenant", "priority"]
    list_filter = ["field", "cluster", "tenant"]
    search_fields = ["value", "tenant__slug", "tenant__name"]
    list_select_related = ["tenant", "cluster"]


class RollupAdmin(ReadOnlyAdmin):
    """Rollups are kept by ingestion and recounts; operators read them, never edit them."""

    list_filter = ["tenant"]
    date_hierarchy = "hour"
    list_select_related = ["tenant"]
    ordering = ["-hour"]

    @admin.display(description=_("allocated GPU-h"), ordering="allocated_gpu_s")
    def allocated(self, row) -> str:
        return f"{row.allocated_gpu_hours:.4f}"

    @admin.display(description=_("busy GPU-h"), ordering="busy_gpu_s")
    def busy(self, row) -> str:
        return f"{row.busy_gpu_hours:.4f}"


@admin.register(TenantHour)
class TenantHourAdmin(RollupAdmin):
    list_display = ["hour", "tenant", "allocated", "busy", "sample_count", "peak_gpus"]
    search_fields = ["tenant__slug"]


@admin.register(GpuHour)
class GpuHourAdmin(RollupAdmin):
    list_display = ["hour", "gpu", "tenant", "allocated", "busy", "sample_count"]
    list_filter = ["tenant", "gpu__node"]
    search_fields = ["gpu__uuid", "gpu__node__name", "tenant__slug"]
    list_select_related = ["tenant", "gpu__node"]


class ReattributionForm(forms.ModelForm):
    """Moves the usage through metering.services.reattribute when it validates, so the admin
    refuses what the API refuses (a range before the raw horizon, no such node, no reason)."""

    author = None  # the operator, set per request by ReattributionAdmin.get_form

    class Meta:
        model = Reattribution
        fields = ["scope", "value", "start", "end", "tenant", "reason"]

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            self.instance = reattribute(
                scope=data["scope"], value=data.get("value", ""), start=data["start"],
                end=data["end"], tenant_id=data["tenant"].pk, reason=data.get("reason", ""),
                author=self.author, now=timezone.now())
        except ValidationError as error:
            for name, messages in error.message_dict.items():
                self.add_error(name if name in self.fields else None, messages)
        return data


@admin.register(Reattribution)
class ReattributionAdmin(DatedAdmin):
    """Moves of usage between tenants, kept for good: what moved, from whom, by whom, why."""

    form = ReattributionForm
    list_display = ["created_at", "scope", "value", "start", "end", "tenant", "gpu_hours",
                    "samples", "author"]
    list_filter = ["scope", "tenant"]
    search_fields = ["value", "reason", "tenant__slug"]
    list_select_related = ["tenant", "author"]
    date_hierarchy = "created_at"

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.author = request.user
        return form

    def get_changeform_initial_data(self, request) -> dict:
        """The fleet page links here with the scope and the range it shows (ISO moments)."""
        initial = super().get_changeform_initial_data(request)
        for name in ("start", "end"):
            try:
                moment = parse_datetime(request.GET.get(name, ""))
            except ValueError:
                moment = None
            if moment is None:
                initial.pop(name, None)
            else:
                initial[name] = moment
        return initial

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        if obj is None:
            return []
        return [f.name for f in Reattribution._meta.fields]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        """The form's clean() has moved the usage through the service."""
