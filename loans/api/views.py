"""The REST API for integrations and operators (DRF). The agents' endpoint is
metering.intake.api."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from core.api import OperatorViewSet
from loans.access import contract_for_user, tenant_for_user
from loans.api.floor import floor_json
from loans.api.renderers import UsageCSVRenderer
from loans.api.serializers import (
    ContractSerializer,
    PlanSerializer,
    TenantSerializer,
    UsageQuery,
    local_day,
)
from loans.maths.billing import local_midnight
from loans.maths.figures import PeriodFigures
from loans.models import Contract, Plan, Tenant
from loans.services.ledger import bills, overage, pooled
from loans.services.ledger import read as ledgers
from loans.services.ledger.dashboard import PeriodChoiceError, figures, started_period
from metering.usage import Hour, tenant_hours


@extend_schema_view(
    list=extend_schema(summary="List the tenants with their attribution rules"),
    create=extend_schema(summary="Add a tenant, with its attribution rules"),
    retrieve=extend_schema(summary="Read one tenant, by its slug"),
    update=extend_schema(summary="Replace a tenant's fields and its attribution rules"),
    partial_update=extend_schema(summary="Change some of a tenant's fields"),
    destroy=extend_schema(summary="Remove a tenant that no contract or usage names"),
)
class TenantViewSet(OperatorViewSet):
    """Tenants with their attribution rules (a list given on update replaces the rules)."""

    queryset = Tenant.objects.prefetch_related("attribution_rules")
    serializer_class = TenantSerializer
    lookup_field = "slug"


@extend_schema_view(
    list=extend_schema(summary="List the plans of the catalogue"),
    create=extend_schema(summary="Add a plan to the catalogue"),
    retrieve=extend_schema(summary="Read one plan, by its id"),
    update=extend_schema(summary="Replace a plan's terms"),
    partial_update=extend_schema(summary="Change some of a plan's terms"),
    destroy=extend_schema(summary="Remove a plan no contract was signed on"),
)
class PlanViewSet(OperatorViewSet):
    queryset = Plan.objects.all()
    serializer_class = PlanSerializer


@extend_schema_view(
    list=extend_schema(summary="List the contracts (by tenant or status)"),
    create=extend_schema(summary="Add a contract for a tenant on a plan"),
    retrieve=extend_schema(summary="Read one contract, with the terms in force"),
    update=extend_schema(summary="Replace a contract not yet signed"),
    partial_update=extend_schema(summary="Change a contract: sign it, or fields not yet signed"),
    destroy=extend_schema(summary="Remove a contract nothing was billed on"),
)
class ContractViewSet(OperatorViewSet):
    serializer_class = ContractSerializer

    def get_queryset(self):
        # Amendments with each contract: the terms in force are read without a query a row.
        contracts = Contract.objects.select_related("tenant", "plan").prefetch_related(
            "amendments")
        if tenant := self.request.query_params.get("tenant"):
            contracts = contracts.filter(tenant__slug=tenant)
        if state := self.request.query_params.get("status"):
            contracts = contracts.filter(status=state)
        return contracts


class UsageRowSerializer(serializers.Serializer):
    """For the schema: one hour or day of usage (or the totals, without start)."""

    start = serializers.DateTimeField(required=False)
    allocated_gpu_hours = serializers.FloatField()
    busy_gpu_hours = serializers.FloatField()
    peak_gpus = serializers.FloatField()
    samples = serializers.IntegerField()


def _row(start, hours: list[Hour]) -> dict:
    return {
        "start": start.isoformat(),
        "allocated_gpu_hours": round(sum(h.allocated_gpu_hours for h in hours), 6),
        "busy_gpu_hours": round(sum(h.busy_gpu_hours for h in hours), 6),
        "peak_gpus": max((h.peak_gpus for h in hours), default=0.0),
        "samples": sum(h.sample_count for h in hours),
    }


class TenantUsage(APIView):
    """A tenant's metered GPU-hours by hour or by day: operators see every tenant, members
    their own; any other tenant answers 404. `?format=csv` gives the rows as a CSV file."""

    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, UsageCSVRenderer]

    @extend_schema(parameters=[UsageQuery], responses={
        (200, "application/json"): inline_serializer("TenantUsage", {
            "tenant": serializers.CharField(), "granularity": serializers.CharField(),
            "time_zone": serializers.CharField(), "start": serializers.DateTimeField(),
            "end": serializers.DateTimeField(), "totals": UsageRowSerializer(),
            "rows": UsageRowSerializer(many=True)}),
        (200, "text/csv"): OpenApiTypes.STR})
    def get(self, request: Request, slug: str) -> Response:
        tenant = tenant_for_user(request.user, slug)
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end, zone = (query.validated_data[k] for k in ("start", "end", "zone"))
        hours = tenant_hours(tenant.pk, start, end)
        if query.validated_data["granularity"] == "hour":
            rows = [_row(h.hour, [h]) for h in hours]
        else:
            days: dict = {}
            for hour in hours:
                days.setdefault(local_day(hour.hour, zone), []).append(hour)
            rows = [_row(local_midnight(day, zone), group) for day, group in days.items()]
        totals = _row(start, hours)
        del totals["start"]
        granularity = query.validated_data["granularity"]
        response = Response({
            "tenant": tenant.slug, "granularity": granularity,
            "time_zone": zone.key, "start": start.isoformat(), "end": end.isoformat(),
            "totals": totals, "rows": rows,
        })
        if request.accepted_renderer.format == "csv":
            name = f"{tenant.slug}-usage-by-{granularity}-{start.astimezone(zone):%Y%m%d}.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def finalize_response(self, request: Request, response: Response, *args, **kwargs):
        """A refusal is JSON ({"detail"} or {parameter: [messages]}), CSV asked for or not."""
        renderer = getattr(request, "accepted_renderer", None)
        if response.status_code >= 400 and renderer is not None and renderer.format == "csv":
            request.accepted_renderer, request.accepted_media_type = (
                JSONRenderer(), JSONRenderer.media_type)
        return super().finalize_response(request, response, *args, **kwargs)



def _decimal(value) -> str | None:
    return None if value is None else str(value)


def _moment(moment, zone) -> str | None:
    return moment.astimezone(zone).isoformat() if moment else None


def _band(figures: PeriodFigures) -> dict | None:
    """The period's projected use as P10 and P90, with how often such a band held the outcome
    on this fleet's own past at this many days left (null while the fleet is too young to
    say) and how many forecasts that rests on, and whether the band's quantiles are the
    fleet's errors or the bench's prior (a fleet too young to pool)."""
    band = figures.projected_band
    if band is None:
        return None
    coverage = figures.coverage
    return {"p10_used_gpu_hours": round(band[0], 3), "p90_used_gpu_hours": round(band[1], 3),
            "coverage": coverage.share if coverage else None,
            "coverage_forecasts": coverage.forecasts if coverage else 0,
            "calibrated_on": "fleet" if figures.burndown.spread.own else "prior"}


def burndown_json(contract: Contract, figures: PeriodFigures, bill: bills.Bill,
                  projected: bills.Bill | None) -> dict:
    """The tenant page's figures for one period, as integrations read them. Money and metered
    GPU-hours are decimal strings; chart series are numbers. The money is the bill's
    (loans.services.ledger.bills): a stated period's statement, else what closing it now bills,
    sharing included; `projected` priced the same way at the forecast's usage."""
    curve, period, zone = figures.burndown, figures.period, contract.zone
    return {
        "contract": contract.pk, "tenant": contract.tenant.slug, "time_zone": zone.key,
        "currency": figures.terms.currency, "as_of": figures.now.isoformat(),
        "period": {
            "number": period.index + 1, "start": period.start.astimezone(zone).isoformat(),
            "end": period.end.astimezone(zone).isoformat(), "state": figures.state,
            "days_left": round(figures.days_left, 4),
        },
        "committed_gpu_hours": str(figures.committed_gpu_hours),
        "used_gpu_hours": str(figures.used_gpu_hours),
        "busy_gpu_hours": str(figures.busy_gpu_hours),
        "remaining_gpu_hours": str(figures.remaining_gpu_hours),
        "utilisation": _decimal(figures.utilisation),
        "cost_so_far": bills.as_json(bill),
        "projected": {
            "used_gpu_hours": str(figures.projected_used_gpu_hours),
            "rate_gpu_hours_per_hour": round(curve.rate_per_hour, 6),
            "exhaustion": _moment(curve.projected_exhaustion, zone),
            # The commitment runs out between these (the band's P90 of usage, then its P10;
            # null: not in this period).
            "exhaustion_between": [_moment(m, zone) for m in curve.exhaustion_range],
            "band": _band(figures),
            **bills.as_json(projected or bill),
        },
        "series": {
            "points": [p.astimezone(zone).isoformat() for p in curve.points],
            "ideal": curve.ideal, "remaining": curve.remaining, "forecast": curve.forecast,
            "forecast_p10": curve.forecast_p10, "forecast_p90": curve.forecast_p90,
        },
        "hours": [
            {"hour": h.hour.astimezone(zone).isoformat(),
             "allocated_gpu_hours": h.allocated_gpu_hours, "busy_gpu_hours": h.busy_gpu_hours,
             "peak_gpus": h.peak_gpus}
            for h in figures.hours
        ],
    }


class PeriodQuery(serializers.Serializer):
    period = serializers.CharField(
        required=False, help_text="A period number (1 is the first), a local date inside it "
        "(YYYY-MM-DD), or 'current' (the default)")


def _period(request: Request, contract: Contract, now):
    try:
        return started_period(contract, request.query_params.get("period"), now)
    except PeriodChoiceError as error:
        raise serializers.ValidationError({"period": [str(error)]}) from None


class ContractBurndown(APIView):
    """One period's burn-down and key figures: what the tenant page shows, as JSON. Operators
    see every contract, members their tenant's; any other contract answers 404."""

    @extend_schema(parameters=[PeriodQuery], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        now = timezone.now()
        period = _period(request, contract, now)
        ledger = ledgers.read(contract, now)
        entry = ledger.entry_for(period)
        found = figures(contract, period, now, entry)
        pool = pooled.pool_of(contract, now, ledger.groups) if entry.state == "open" else None
        projected = bills.projected(contract.pk, entry.terms, period,
                                     found.projected_used_gpu_hours, pool, entry.credit) \
            if entry.state == "open" else None
        body = burndown_json(contract, found, bills.of_entry(entry), projected)
        policy = overage.describe(contract, now, entry)
        # What the scheduler does now: the policy in force and where the current period
        # stands (open, overage or held), whichever period was asked for.
        body["admission"] = {"policy": policy.kind, "state": policy.state}
        body["floor"] = floor_json(entry, contract.zone)
        return Response(body)
