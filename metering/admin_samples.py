"""A read-only, filterable list of raw usage samples for operators (newest first). The node a
sample shows is its device's node now; the node filter follows which node held the device
when (GpuTenure)."""

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.dateparse import parse_date
from django.utils.translation import gettext as _

from core.bounds import day_in_range, whole_number
from metering.models import Node, UsageSample, tenant_model
from metering.services import reported_by

PAGE_SIZE = 100
MAX_PAGE = 100_000  # further back, narrow the list by date instead
EPOCH, FAR = datetime(2000, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)


def _day_start(raw: str, field: str, errors: list[str]) -> datetime | None:
    if not raw:
        return None
    try:
        day = parse_date(raw)
    except ValueError:
        day = None
    if day is None or not day_in_range(day):
        errors.append(_("%(field)s: %(value)s is not a date (YYYY-MM-DD) from 1970 to 2999.")
                      % {"field": field, "value": raw[:40]})
        return None
    return datetime.combine(day, time(0), tzinfo=ZoneInfo(settings.TIME_ZONE))


@permission_required("metering.view_usagesample", raise_exception=True)
def sample_list(request: HttpRequest) -> HttpResponse:
    params = request.GET
    errors: list[str] = []
    samples = UsageSample.objects.select_related("gpu__node", "tenant", "owner").order_by(
        "-ts", "gpu_id")
    if params.get("node"):
        node = Node.objects.filter(name=params["node"]).first()
        # The node's devices while it held them (which node reported which hours).
        samples = (samples.filter(reported_by(node, EPOCH, FAR)) if node is not None
                   else samples.none())
    tenant = params.get("tenant", "")
    if tenant == "-":
        samples = samples.filter(tenant__isnull=True)
    elif tenant:
        samples = samples.filter(tenant__slug=tenant)
    if params.get("q"):
        samples = samples.filter(gpu__uuid__icontains=params["q"].strip())
    since = _day_start(params.get("since", ""), _("since"), errors)
    until = _day_start(params.get("until", ""), _("until"), errors)
    if since:
        samples = samples.filter(ts__gte=since)
    if until:
        samples = samples.filter(ts__lt=until)
    page = whole_number(params.get("page", "1"), 1, MAX_PAGE)
    if page is None:
        page = 1
        errors.append(_("page must be a whole number from 1 to %(most)s.")
                      % {"most": f"{MAX_PAGE:,}"})
    # No COUNT(*): the table holds every sample of the retention window. One row more than a
    # page says whether a next page exists.
    rows = list(samples[(page - 1) * PAGE_SIZE : page * PAGE_SIZE + 1])
    query = params.copy()
    query.pop("page", None)
    context = {
        **admin.site.each_context(request),
        "title": _("Usage samples"),
        "samples": rows[:PAGE_SIZE],
        "page": page,
        "has_next": len(rows) > PAGE_SIZE,
        "query": query.urlencode(),
        "params": params,
        "errors": errors,
        "nodes": Node.objects.values_list("name", flat=True),
        "tenants": _tenant_choices(),
        "opts": UsageSample._meta,
    }
    return TemplateResponse(request, "admin/metering/usagesample/list.html", context,
                            status=400 if errors else 200)


def _tenant_choices() -> list[tuple[str, str]]:
    return [("-", _("unattributed"))] + list(tenant_model().objects.values_list("slug", "name"))
