"""Sharing groups over the API: operators create groups, add and remove contracts from a period
that has not begun, and read each group's members over time and its statements; a lead reads
the groups its contracts are in: the members' team names and the group's totals, never another
team's usage or statements; a member who is not a lead reads none (loans.access.groups_for)."""

from django.core.exceptions import ValidationError
from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from loans.access import allowed, groups_for, require
from loans.maths import billing
from loans.models import Contract, GroupStatement, SharingGroup, SharingMember
from loans.models.fields import currency_validator
from loans.services.ledger import sharing

MAX_CONTRACTS = 200


class GroupRequest(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    currency = serializers.CharField(max_length=3, validators=[currency_validator])
    contracts = serializers.ListField(child=serializers.IntegerField(min_value=1),
                                      max_length=MAX_CONTRACTS, required=False, default=list,
                                      help_text="Contract ids to add, each from its next "
                                                "period not begun (its first where it has "
                                                "no statement yet).")

    def validate_name(self, value: str) -> str:
        if SharingGroup.objects.filter(name=value).exists():
            raise serializers.ValidationError(f"A sharing group named {value!r} exists.")
        return value


class MemberRequest(serializers.Serializer):
    contract = serializers.IntegerField(min_value=1)


def _member(row: SharingMember, full: bool) -> dict:
    out = {"contract": row.contract_id, "tenant": row.contract.tenant.name,
           "from": row.joins_at.isoformat(),
           "until": row.leaves_at.isoformat() if row.leaves_at else None,
           "ends": None if row.is_void else row.ends_at.isoformat(),
           "void": row.is_void}
    if full:
        out |= {"tenant_slug": row.contract.tenant.slug,
                "added_by": row.added_by.get_username() if row.added_by else None,
                "removed_by": row.removed_by.get_username() if row.removed_by else None}
    return out


def _statement(g: GroupStatement) -> dict:
    def amount(value):
        return str(billing.money(value, g.currency))

    return {"period_start": g.period_start.isoformat(), "period_end": g.period_end.isoformat(),
            "committed_cost": amount(g.committed_cost),
            "overage_cost_after_sharing": amount(g.overage_cost),
            "provider_total": amount(g.provider_total), "saving": amount(g.saving),
            "shared_gpu_hours": str(g.shared_gpu_hours), "currency": g.currency}


def group_json(group: SharingGroup, user) -> dict:
    full = allowed(user, "read-group-members")
    rows = group.members.select_related("contract__tenant", "added_by", "removed_by")
    return {"id": group.pk, "name": group.name, "currency": group.currency,
            "members": [_member(r, full) for r in rows],
            "statements": [_statement(g) for g in group.statements.order_by("period_start")]}


def _group(user, pk: int) -> SharingGroup:
    group = groups_for(user).filter(pk=pk).first()
    if group is None:
        raise Http404("No such sharing group.")
    return group


def _contract(pk: int) -> Contract:
    contract = Contract.objects.select_related("tenant", "plan").filter(pk=pk).first()
    if contract is None:
        raise ValidationError({"contracts": f"No contract {pk}."})
    return contract


def _refusal(error: ValidationError) -> Response:
    body = error.message_dict if hasattr(error, "error_dict") else {"detail": error.messages}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class SharingGroups(APIView):
    """Sharing groups: operators see and create them; a lead sees those its contracts are in.
    POST `{"name", "currency", "contracts": [ids]}` creates one, each contract joining from
    its next period not begun (from its first where it has no statement yet); a contract of
    another calendar or currency is refused with the reason, and nothing is created."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(summary="List the sharing groups the caller may see",
                   operation_id="v1_sharing_groups_list",
                   responses={200: {"type": "array", "items": {"type": "object"}}})
    def get(self, request: Request) -> Response:
        return Response([group_json(g, request.user)
                         for g in groups_for(request.user).order_by("name")])

    @extend_schema(summary="Create a sharing group", request=GroupRequest,
                   operation_id="v1_sharing_groups_create",
                   responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        require(request.user, "create-sharing-group")
        query = GroupRequest(data=request.data)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            contracts = [_contract(pk) for pk in dict.fromkeys(data["contracts"])]
            group = sharing.create_group(name=data["name"], currency=data["currency"],
                                         contracts=contracts, by=request.user,
                                         now=timezone.now())
        except ValidationError as error:
            return _refusal(error)
        return Response(group_json(group, request.user), status=status.HTTP_201_CREATED)


class SharingGroupDetail(APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(summary="A sharing group: its members over time and its statements",
                   operation_id="v1_sharing_groups_retrieve",
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        return Response(group_json(_group(request.user, pk), request.user))


class SharingGroupContracts(APIView):
    """POST `{"contract": id}` adds a contract from its next period not begun."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(summary="Add a contract to a sharing group", request=MemberRequest,
                   operation_id="v1_sharing_groups_contracts_add",
                   responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        group = _group(request.user, pk)
        require(request.user, "add-sharing-member")
        query = MemberRequest(data=request.data)
        query.is_valid(raise_exception=True)
        try:
            sharing.join(group, _contract(query.validated_data["contract"]), by=request.user,
                         now=timezone.now())
        except ValidationError as error:
            return _refusal(error)
        return Response(group_json(group, request.user), status=status.HTTP_201_CREATED)


class SharingGroupContract(APIView):
    """DELETE takes a contract out of the group from its next period not begun. A contract
    that has ended left with its end, and one in its last period shares to its end: both are
    answered with what they are (`detail`), not refused, so removing twice is harmless."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(summary="Remove a contract from a sharing group", request=None,
                   operation_id="v1_sharing_groups_contracts_remove",
                   responses={200: OpenApiTypes.OBJECT})
    def delete(self, request: Request, pk: int, contract_id: int) -> Response:
        group = _group(request.user, pk)
        require(request.user, "remove-sharing-member")
        now = timezone.now()
        try:
            member = sharing.leave(group, _contract(contract_id), by=request.user, now=now)
        except ValidationError as error:
            return _refusal(error)
        return Response(group_json(group, request.user)
                        | {"detail": sharing.departure(member, now)})
