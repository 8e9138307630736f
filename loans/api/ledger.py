"""The ledger over the API: a contract's statements (JSON, CSV, FOCUS), its amendments, its
termination. Leads read their own tenant's; operators read every contract and write."""

from dataclasses import replace

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from loans.access import contract_for_user, require
from loans.api.renderers import PDFRenderer, TableCSVRenderer
from loans.models import Amendment, Contract
from loans.services import exports
from loans.services.exports import pdf, statements
from loans.services.ledger import amendments
from loans.services.ledger import read as ledgers

LANGUAGES = settings.LANGUAGES

# `?format=` of the statements endpoint: each a format of loans.services.exports ("csv", the
# first, is one row a statement line).
CSV_FORMATS = {"csv": "statements", "focus": "focus"}
CSV_RENDERERS = [type(f"{name.title()}CSVRenderer", (TableCSVRenderer,), {"format": fmt})
                 for fmt, name in CSV_FORMATS.items()]


class ContractStatements(APIView):
    """Every statement of a contract with its lines and the terms it was priced with, and the
    corrections pending for the next one. `?format=csv`: one row per line; `?format=focus`:
    one row per charge in FinOps FOCUS 1.2 columns (docs/statements.md); `?format=pdf` or
    `Accept: application/pdf`: the statements as the tenant page shows them, in `?lang=`
    (en or zh-hans; the request's language otherwise)."""

    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, *CSV_RENDERERS, PDFRenderer]

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["json", *CSV_FORMATS, "pdf"]),
                    OpenApiParameter("lang", str, enum=[code for code, _name in LANGUAGES],
                                     description="The PDF's language"),
                    OpenApiParameter("period", int, description=(
                        "Only this period's (1 is the first): its statement, those that "
                        "corrected it and its pending correction"))],
        responses={(200, "application/json"): OpenApiTypes.OBJECT,
                   (200, "text/csv"): OpenApiTypes.STR,
                   (200, "application/pdf"): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        ledger = ledgers.read(contract, timezone.now())
        number = request.query_params.get("period")
        if number not in (None, ""):
            ledger = _one_period(ledger, number)
        if request.accepted_renderer.format == "pdf":
            return self._pdf(request, ledger, number)
        name = CSV_FORMATS.get(request.accepted_renderer.format)
        if name is None:
            return Response(statements.as_json(ledger))
        response = Response(exports.table(name, ledger))
        response["Content-Disposition"] = (
            f'attachment; filename="{exports.filename(contract, name)}"')
        return response

    def _pdf(self, request: Request, ledger: ledgers.Ledger, number: str | None) -> Response:
        language = request.query_params.get("lang") or translation.get_language()
        if language not in dict(LANGUAGES):
            raise serializers.ValidationError({"lang": [
                _("lang must be one of %(known)s; got %(value)s.")
                % {"known": ", ".join(dict(LANGUAGES)), "value": repr(language[:16])}]})
        try:
            body = pdf.render(ledger, language)
        except pdf.PDFUnavailable as missing:
            return Response({"detail": str(missing)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        response = Response(body)
        name = pdf.filename(ledger.contract, int(number) if number else None)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def finalize_response(self, request: Request, response: Response, *args, **kwargs):
        """A refusal is JSON, whatever format was asked for."""
        renderer = getattr(request, "accepted_renderer", None)
        if response.status_code >= 400 and renderer is not None and renderer.format in (
                *CSV_FORMATS, "pdf"):
            request.accepted_renderer, request.accepted_media_type = (
                JSONRenderer(), JSONRenderer.media_type)
        return super().finalize_response(request, response, *args, **kwargs)


def _one_period(ledger: ledgers.Ledger, number: str) -> ledgers.Ledger:
    """The ledger cut to one started period: its statement, the statements that carry a
    correction of it, and its pending correction; 400 with the reason for any other value."""
    started = len(ledger.entries)
    if not (number.isdigit() and 1 <= int(number) <= started):
        raise serializers.ValidationError({"period": [
            _("period must be the number of a started period, 1 to %(last)s; got %(value)s.")
            % {"last": started, "value": repr(number[:32])}]})
    index = int(number) - 1
    return replace(ledger, entries=[e for e in ledger.entries if e.period.index == index],
                   statements=[s for s in ledger.statements if
                               (s.kind == "period" and s.period_index == index)
                               or any(c.period_index == index for c in s.corrections.all())])


class AmendmentSerializer(serializers.ModelSerializer):
    """An amendment as written: `from_period` is the period's number (1 is the first)."""

    from_period = serializers.SerializerMethodField()
    author = serializers.StringRelatedField()

    class Meta:
        model = Amendment
        fields = ["id", "kind", "from_period", "changes", "reason", "author", "created_at"]

    def get_from_period(self, amendment: Amendment) -> int:
        return amendment.from_period + 1


class AmendmentRequest(serializers.Serializer):
    from_period = serializers.IntegerField(
        min_value=1, max_value=120,
        help_text="The number of the first period the new terms apply to (1 is the first); "
                  "it must not have begun.")
    changes = serializers.DictField(
        help_text='The terms to change and their new values: {"committed_gpu_hours": "900"}. '
                  f"Amendable: {', '.join(Contract.AMENDABLE)}.")
    reason = serializers.CharField(max_length=2000)


class TerminationRequest(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


def _refusal(error: ValidationError) -> Response:
    body = error.message_dict if hasattr(error, "error_dict") else {"detail": error.messages}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class ContractAmendments(APIView):
    """A contract's amendments (terminations included), oldest first. Operators write one with
    POST; it applies from the start of a period that has not begun."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses={200: AmendmentSerializer(many=True)},
                   summary="List a contract's amendments, oldest first")
    def get(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        return Response(AmendmentSerializer(contract.amendments_in_order(), many=True).data)

    @extend_schema(request=AmendmentRequest, responses={201: AmendmentSerializer},
                   summary="Amend a contract from a period that has not begun (operators)")
    def post(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        require(request.user, "amend-contract", contract.tenant_id)
        query = AmendmentRequest(data=request.data)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            amendment = amendments.amend(
                contract=contract, changes=data["changes"], from_period=data["from_period"] - 1,
                reason=data["reason"], author=request.user, now=timezone.now())
        except ValidationError as error:
            return _refusal(error)
        return Response(AmendmentSerializer(amendment).data, status=status.HTTP_201_CREATED)


class ContractTermination(APIView):
    """End a contract early, at the end of its current period (operators)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=TerminationRequest, responses={201: AmendmentSerializer})
    def post(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        require(request.user, "amend-contract", contract.tenant_id)
        query = TerminationRequest(data=request.data)
        query.is_valid(raise_exception=True)
        try:
            amendment = amendments.terminate(contract=contract,
                                             reason=query.validated_data["reason"],
                                             author=request.user, now=timezone.now())
        except ValidationError as error:
            return _refusal(error)
        return Response(AmendmentSerializer(amendment).data, status=status.HTTP_201_CREATED)
