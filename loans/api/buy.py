"""The buy-vs-loan comparison over the API: the page's form and arithmetic
(loans.services.advice.buy), answered as JSON."""

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from loans.access import tenant_for_user
from loans.services.advice.buy import BuyForm, contract_of, evaluate, loan_of, with_defaults


class BuyVsLoan(APIView):
    """The buy-vs-loan comparison as JSON; parameters as on the page (defaults where left out,
    the utilisation measured where there is usage). Every figure is over the same `months`:
    buying counts the value the GPUs lose, overhead and maintenance; the loan its upfront fee
    and monthly bills; cheaper, the costs per used GPU-hour, the break-even utilisation and
    the cumulative series all compare those two."""

    @extend_schema(parameters=[OpenApiParameter(name, str, required=False) for name in (
        "target", "gpus", "price_per_gpu", "overhead_per_gpu_year", "maintenance_percent",
        "depreciation_years", "utilisation_percent", "months")],
        responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        tenant = tenant_for_user(request.user, slug)
        contract = contract_of(tenant)
        if contract is None:
            return Response({"detail": _("This tenant has no contract.")}, status=404)
        form = BuyForm(with_defaults(contract, request.query_params.dict(), timezone.now()),
                       contract=contract)
        if not form.is_valid():
            return Response(form.errors.get_json_data(escape_html=True), status=400)
        result = evaluate(form, contract)
        text = {k: None if v is None else str(v) for k, v in {
            "used_gpu_hours_per_month": result.used_gpu_hours_per_month,
            "buy_per_used_gpu_hour": result.buy_per_used_gpu_hour,
            "loan_per_used_gpu_hour": result.loan_per_used_gpu_hour,
            "buy_total": result.buy_total, "loan_total": result.loan_total,
            "break_even_utilisation": result.break_even_utilisation,
            "cash_up_front": result.cash_up_front, "value_left": result.value_left}.items()}
        return Response({
            "currency": contract.terms().currency, "loan": loan_of(form, contract).name,
            "inputs": {k: str(v) for k, v in form.cleaned_data.items()},
            "months": result.months, **text, "cheaper": result.cheaper,
            "buy_cumulative": [str(v) for v in result.buy_cumulative],
            "loan_cumulative": [str(v) for v in result.loan_cumulative],
        })

