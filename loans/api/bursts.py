"""Burst requests and quota manifests over the API: leads ask and cancel, operators approve,
reject, revoke and set priorities; a cluster's GitOps pipeline reads each tenant's quotas."""

from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from loans.access import require, tenant_for_user, tenants_for
from loans.models import BurstEvent, BurstRequest, Contract
from loans.schedulers.kubernetes import manifests
from loans.services import bursts


class BurstEventSerializer(serializers.ModelSerializer):
    actor = serializers.StringRelatedField()
    # In the caller's language (Accept-Language), as the pages say it.
    note = serializers.CharField(source="text", read_only=True)

    class Meta:
        model = BurstEvent
        fields = ["at", "state", "actor", "note"]


class VisibleContract(serializers.PrimaryKeyRelatedField):
    """Only the contracts of tenants the caller may see: the browsable API's choices list
    no other tenant's, and an id of another's is refused as a missing one is."""

    def get_queryset(self):
        request = self.context.get("request")
        if request is None:
            return Contract.objects.none()
        return Contract.objects.filter(tenant__in=tenants_for(request.user))


class BurstSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="contract.tenant.slug", read_only=True)
    requested_by = serializers.StringRelatedField()
    events = BurstEventSerializer(many=True, read_only=True)
    contract = VisibleContract()
    gpus = serializers.IntegerField(min_value=1, max_value=bursts.MAX_GPUS)
    note = serializers.CharField(source="text", read_only=True)

    class Meta:
        model = BurstRequest
        fields = ["id", "tenant", "contract", "gpus", "starts_at", "ends_at", "reason",
                  "priority", "state", "note", "requested_by", "created_at", "decided_at",
                  "events"]
        read_only_fields = ["priority", "state", "note", "created_at", "decided_at"]


class DecisionSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
    priority = serializers.IntegerField(required=False, min_value=-1000, max_value=1000)


@extend_schema_view(
    list=extend_schema(summary="List the burst requests the caller may see"),
    retrieve=extend_schema(summary="One burst request, with what happened to it"))
class BurstViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                   viewsets.GenericViewSet):
    """Burst requests: members see their tenants' (operators every one); leads ask for GPUs
    above the base quota and cancel; operators approve, reject, revoke and prioritise."""

    serializer_class = BurstSerializer

    def get_queryset(self):
        return BurstRequest.objects.filter(
            contract__tenant__in=tenants_for(self.request.user)
        ).select_related("contract__tenant", "requested_by").prefetch_related("events__actor")

    @extend_schema(
        summary="Ask for GPUs above the base quota (leads)",
        parameters=[OpenApiParameter(
            "Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
            description="Up to 64 printable ASCII characters. A request with a key already "
                        "used for this contract asks for nothing new: it answers 200 with the "
                        "request that key made, as it is now.")],
        responses={201: BurstSerializer, 200: BurstSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        contract = data["contract"]
        require(request.user, "ask-burst", contract.tenant_id)
        try:
            burst = bursts.submit(contract=contract, user=request.user, gpus=data["gpus"],
                                  starts_at=data["starts_at"], ends_at=data["ends_at"],
                                  reason=data["reason"], now=timezone.now(),
                                  submission=request.headers.get("Idempotency-Key", ""))
        except bursts.BurstError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
        # A retry with the same Idempotency-Key gets the request it made, as it is now.
        return Response(self.get_serializer(burst).data,
                        status=status.HTTP_200_OK if burst.repeated else status.HTTP_201_CREATED)

    def _decide(self, request: Request, what: str) -> Response:
        burst = self.get_object()
        require(request.user, "cancel-burst" if what == "cancel" else "decide-burst",
                burst.contract.tenant_id)
        decision = DecisionSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        try:
            burst = bursts.decide(burst, what, actor=request.user, now=timezone.now(),
                                  note=decision.validated_data["note"],
                                  priority=decision.validated_data.get("priority"))
        except bursts.BurstError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(burst).data)

    @extend_schema(summary="Cancel a request not yet over (leads)", request=DecisionSerializer,
                   responses=BurstSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk=None) -> Response:
        return self._decide(request, "cancel")

    @extend_schema(summary="Grant a queued request (operators)", request=DecisionSerializer,
                   responses=BurstSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk=None) -> Response:
        return self._decide(request, "approve")

    @extend_schema(summary="Refuse a queued request (operators)", request=DecisionSerializer,
                   responses=BurstSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk=None) -> Response:
        return self._decide(request, "reject")

    @extend_schema(summary="Take back a granted burst (operators)", request=DecisionSerializer,
                   responses=BurstSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk=None) -> Response:
        return self._decide(request, "revoke")

    @extend_schema(summary="Set a queued request's priority (operators)",
                   request=DecisionSerializer, responses=BurstSerializer)
    @action(detail=True, methods=["post"])
    def prioritise(self, request: Request, pk=None) -> Response:
        return self._decide(request, "prioritise")


class QuotaManifests(APIView):
    """The tenant's effective GPU quota now (base plus granted bursts) as a Kubernetes
    ResourceQuota and a Kueue ClusterQueue, in one YAML stream."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses={(200, "application/yaml"): OpenApiTypes.STR})
    def get(self, request: Request, slug: str) -> HttpResponse:
        tenant = tenant_for_user(request.user, slug)
        text = manifests.tenant_manifests(tenant, timezone.now())
        if text is None:
            return HttpResponse(_("This tenant has no active contract.\n"), status=404,
                                content_type="text/plain; charset=utf-8")
        return HttpResponse(text, content_type="application/yaml; charset=utf-8")
