"""The tenant page's utilisation heatmap, which the page loads after itself: a Plotly figure
built where the pages' other figures are (loans.web.charts), served as a REST endpoint
(/api/v1/contracts/<pk>/heatmap) so scripts may fetch it too."""

from django.conf import settings
from django.utils import timezone, translation
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from loans.access import contract_for_user
from loans.services.ledger.dashboard import PeriodChoiceError, gpu_days, started_period
from loans.web import charts
from metering.usage.fleet import gpu_labels


class HeatmapQuery(serializers.Serializer):
    period = serializers.CharField(
        required=False, help_text="A period number (1 is the first), a local date inside it "
        "(YYYY-MM-DD), or 'current' (the default)")
    lang = serializers.ChoiceField(
        required=False, choices=[code for code, _name in settings.LANGUAGES],
        help_text="The language of the figure's titles and labels (default: the request's)")


class ContractHeatmap(APIView):
    """Utilisation of each GPU the tenant held, by local day of a period, as a Plotly figure
    (the tenant page loads it after the page itself)."""

    @extend_schema(parameters=[HeatmapQuery], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        contract = contract_for_user(request.user, pk)
        now = timezone.now()
        try:
            period = started_period(contract, request.query_params.get("period"), now)
        except PeriodChoiceError as error:
            raise serializers.ValidationError({"period": [str(error)]}) from None
        days = gpu_days(contract, period, now)
        lang = request.query_params.get("lang", "")
        if lang not in dict(settings.LANGUAGES):  # absent or unknown: the request's own
            lang = translation.get_language()
        with translation.override(lang):
            return Response(charts.heatmap_figure(days, gpu_labels({d.gpu_id for d in days})))
