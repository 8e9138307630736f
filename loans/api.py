"""The REST API for integrations and operators (DRF). The agents' endpoint is metering.api."""

from django.db.models import ProtectedError
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from loans.access import tenant_for_user
from loans.billing import local_midnight
from loans.models import Contract, Plan, Tenant
from loans.serializers import (
    ContractSerializer,
    PlanSerializer,
    TenantSerializer,
    UsageQuery,
    local_day,
)
from metering.usage import Hour, tenant_hours


class ProtectedDestroyMixin:
    """Deleting what history depends on answers 409 with the reason, not a server error."""

    def destroy(self, request: Request, *args, **kwargs) -> Response:
        try:
            return super().destroy(request, *args, **kwargs)
        except ProtectedError as error:
            used_by = sorted({obj._meta.verbose_name_plural for obj in error.protected_objects})
            return Response(
                {"detail": _("In use by %(what)s; it cannot be deleted.")
                 % {"what": ", ".join(map(str, used_by))}},
                status=status.HTTP_409_CONFLICT,
            )


class OperatorViewSet(ProtectedDestroyMixin, viewsets.ModelViewSet):
    permission_classes = [permissions.IsAdminUser]


class TenantViewSet(OperatorViewSet):
    """Tenants with their attribution rules (a list given on update replaces the rules)."""

    queryset = Tenant.objects.prefetch_related("attribution_rules")
    serializer_class = TenantSerializer
    lookup_field = "slug"


class PlanViewSet(OperatorViewSet):
    queryset = Plan.objects.all()
    serializer_class = PlanSerializer


class ContractViewSet(OperatorViewSet):
    serializer_class = ContractSerializer

    def get_queryset(self):
        contracts = Contract.objects.select_related("tenant", "plan")
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
    their own; any other tenant answers 404."""

    @extend_schema(parameters=[UsageQuery], responses={200: inline_serializer("TenantUsage", {
        "tenant": serializers.CharField(), "granularity": serializers.CharField(),
        "time_zone": serializers.CharField(), "start": serializers.DateTimeField(),
        "end": serializers.DateTimeField(), "totals": UsageRowSerializer(),
        "rows": UsageRowSerializer(many=True)})})
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
        return Response({
            "tenant": tenant.slug, "granularity": query.validated_data["granularity"],
            "time_zone": zone.key, "start": start.isoformat(), "end": end.isoformat(),
            "totals": totals, "rows": rows,
        })

