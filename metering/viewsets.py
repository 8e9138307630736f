"""Operators' API for clusters, nodes (creating one, or rotating its token, returns the token
once) and re-attributions."""

from django.core.exceptions import ValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ModelCleanMixin, OperatorPermissions, OperatorViewSet
from metering.models import Cluster, Node, Reattribution, tenant_model
from metering.services import reattribute


class ClusterSerializer(ModelCleanMixin, serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["id", "name", "kind", "description", "created_at"]
        read_only_fields = ["created_at"]


@extend_schema_view(
    list=extend_schema(summary="List the clusters"),
    create=extend_schema(summary="Add a cluster"),
    retrieve=extend_schema(summary="Read one cluster, by its name"),
    update=extend_schema(summary="Replace a cluster's fields"),
    partial_update=extend_schema(summary="Change some of a cluster's fields"),
    destroy=extend_schema(summary="Remove a cluster that no node or owner rule uses"),
)
class ClusterViewSet(OperatorViewSet):
    """Clusters: every node belongs to one, and owner rules hold within one."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    lookup_field = "name"


class NodeSerializer(ModelCleanMixin, serializers.ModelSerializer):
    default_tenant = serializers.SlugRelatedField(
        slug_field="slug", queryset=tenant_model().objects.all(), allow_null=True, required=False)
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), required=False,
        help_text="The node's cluster (default: the default cluster).")
    has_token = serializers.BooleanField(read_only=True)

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "max_devices", "default_tenant", "has_token",
                  "token_prefix", "token_issued_at", "last_seen_at", "agent_version",
                  "dropped_samples", "created_at"]
        read_only_fields = ["token_prefix", "token_issued_at", "last_seen_at", "agent_version",
                            "dropped_samples", "created_at"]


class IssuedTokenSerializer(NodeSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown only in this answer.")

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "token"]


@extend_schema_view(
    list=extend_schema(summary="List the nodes, with when each was last seen"),
    create=extend_schema(summary="Register a node; the answer holds its token, once"),
    retrieve=extend_schema(summary="Read one node, by its id"),
    update=extend_schema(summary="Replace a node's fields"),
    partial_update=extend_schema(summary="Change some of a node's fields"),
    destroy=extend_schema(summary="Remove a node that never reported"),
)
class NodeViewSet(OperatorViewSet):
    queryset = Node.objects.select_related("default_tenant")
    serializer_class = NodeSerializer
    action_permissions = {"rotate_token": "change", "revoke_token": "change"}

    @extend_schema(responses={201: IssuedTokenSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        response = super().create(request, *args, **kwargs)
        node = Node.objects.get(pk=response.data["id"])
        return Response(self._with_token(node, node.issue_token()), status=201)

    @extend_schema(request=None, responses={200: IssuedTokenSerializer},
                   summary="Issue the node a new token; the old one stops working",
                   description="Operators: the answer holds the new token, the only time it "
                   "is shown; the node's agent needs it before its next batch.")
    @action(detail=True, methods=["post"], url_path="rotate-token")
    def rotate_token(self, request: Request, pk=None) -> Response:
        node = self.get_object()
        return Response(self._with_token(node, node.issue_token()))

    @extend_schema(request=None, responses={200: NodeSerializer},
                   summary="Revoke the node's token",
                   description="Operators: the node's batches are refused (401) until a "
                   "token is issued again; what it reported stays.")
    @action(detail=True, methods=["post"], url_path="revoke-token")
    def revoke_token(self, request: Request, pk=None) -> Response:
        node = self.get_object()
        node.revoke_token()
        return Response(NodeSerializer(node).data)

    @staticmethod
    def _with_token(node: Node, token: str) -> dict:
        node.token = token
        return IssuedTokenSerializer(node).data


class ReattributionSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=tenant_model().objects.all())
    author = serializers.StringRelatedField()

    class Meta:
        model = Reattribution
        fields = ["id", "scope", "value", "start", "end", "tenant", "reason", "gpu_hours",
                  "samples", "moved_from", "author", "created_at"]
        read_only_fields = ["gpu_hours", "samples", "moved_from", "author", "created_at"]


@extend_schema_view(
    list=extend_schema(summary="List the moves of usage between tenants"),
    create=extend_schema(summary="Move a time range's usage to a tenant, for good"),
    retrieve=extend_schema(summary="Read one move of usage, by its id"),
)
class ReattributionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                           mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Moves of usage between tenants: a node's, an owner value's (namespace, account, user,
    job) or the unattributed usage of a time range. Kept for good; never changed or deleted.
    Open periods change at once; closed ones get corrections on both sides."""

    permission_classes = [OperatorPermissions]
    queryset = Reattribution.objects.select_related("tenant", "author")
    serializer_class = ReattributionSerializer

    def perform_create(self, serializer) -> None:
        data = serializer.validated_data
        try:
            serializer.instance = reattribute(
                scope=data["scope"], value=data.get("value", ""), start=data["start"],
                end=data["end"], tenant_id=data["tenant"].pk, reason=data["reason"],
                author=self.request.user, now=timezone.now())
        except ValidationError as error:
            raise serializers.ValidationError(serializers.as_serializer_error(error)) from None
