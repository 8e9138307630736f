"""A contract's overage policy over the API: read by whoever may see the contract, set by its
tenant's leads and by operators. What it means in GPU-hours comes with it."""

from django.core.exceptions import ValidationError
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from loans.access import contract_for_user, require
from loans.maths import billing
from loans.models import Contract
from loans.services.ledger import overage

Body = inline_serializer("OveragePolicyBody", {
    "policy": serializers.ChoiceField(choices=["allow", "budget", "hold"]),
    "budget": serializers.CharField(required=False, allow_null=True,
                                    help_text="money a period, in the contract's currency"),
})


def policy_json(contract: Contract) -> dict:
    d = overage.describe(contract, timezone.now())
    return {"contract": contract.pk, "policy": d.kind,
            "budget": None if d.budget is None else str(billing.money(d.budget, d.currency)),
            "currency": d.currency,
            "overage_gpu_hours": None if d.overage_gpu_hours is None
            else str(d.overage_gpu_hours),
            "set_by": d.set_by, "set_at": d.set_at.isoformat() if d.set_at else None,
            # open (commitment left), overage (past it, running) or held; null: no period now
            "state": d.state}


class ContractOveragePolicy(APIView):
    """What the contract may use past its commitment each period: `allow` (every hour, at the
    overage rate), `budget` (up to `budget`, money a period) or `hold` (nothing: jobs wait for
    the next period). The schedulers enforce it (Slurm's GPU-minute budgets)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses={200: OpenApiTypes.OBJECT},
                   summary="Read the contract's overage policy")
    def get(self, request: Request, pk: int) -> Response:
        return Response(policy_json(contract_for_user(request.user, pk)))

    @extend_schema(request=Body, responses={200: OpenApiTypes.OBJECT},
                   summary="Set the contract's overage policy (its lead or operators)")
    def put(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        require(request.user, "set-overage-policy", contract.tenant_id)
        body = request.data if isinstance(request.data, dict) else {}
        try:
            overage.set_policy(contract, kind=body.get("policy"),
                               budget=overage.read_budget(body.get("budget")),
                               by=request.user, now=timezone.now())
        except ValidationError as error:
            raise serializers.ValidationError(serializers.as_serializer_error(error)) from None
        return Response(policy_json(contract))
