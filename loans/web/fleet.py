"""The operators' fleet page and its CSV export: every active contract's period, capacity,
nodes, unattributed usage, the meters' differences, and the sharing groups' pooled burn-down
with what sharing would have saved."""

from datetime import datetime, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core import spreadsheet
from loans.maths import admission
from loans.maths.billing import minor_unit
from loans.models import Alert, policies_of
from loans.services import fleet_status as fleet
from loans.services.advice import what_if
from loans.services.ledger import pooled
from loans.web import charts
from loans.web.decorators import operator_required
from loans.web.views import check_rows
from metering.usage import fleet as metering_fleet
from metering.usage import slurm as metering_slurm

POOL_AHEAD = timedelta(days=7)
FLEET_PAGE_SIZE = 100  # contracts a page; the CSV export has them all


FLEET_COLUMNS = [  # sort key, heading
    ("tenant", gettext_lazy("Tenant")),
    ("plan", gettext_lazy("Plan")),
    ("used", gettext_lazy("Used")),
    ("projected", gettext_lazy("Projected")),
    ("money", gettext_lazy("Projected overage or waste")),
    ("days_left", gettext_lazy("Days left")),
    ("availability", gettext_lazy("Availability")),
    ("alerts", gettext_lazy("Open alerts")),
]



def _what_if(statuses: list, now: datetime) -> list:
    """What sharing would have saved each set of running contracts with one calendar and
    currency, over their last three stated periods (those with a saving): their recent
    statements read in one query."""
    sets = what_if.candidates([s.contract for s in statuses])
    stated = what_if.stated_of([c for contracts in sets for c in contracts],
                               since=now - timedelta(days=31 * (WHAT_IF_PERIODS + 1)))
    out = []
    for contracts in sets:
        try:
            replay = what_if.what_if(contracts, WHAT_IF_PERIODS, stated)
        except ValidationError:  # statements of another calendar (an ended contract's)
            continue
        if replay.periods and replay.saving > 0:
            out.append(replay)
    return sorted(out, key=lambda r: -r.saving)


WHAT_IF_PERIODS = 3


def _fleet_sort(request: HttpRequest) -> tuple[str, bool]:
    sort = request.GET.get("sort", "projected")
    if sort not in fleet.SORTS:
        sort = "projected"
    return sort, request.GET.get("dir", "desc") != "asc"


def _worst(checks: list, shown: int = 20) -> list:
    """The tenant-days whose meters differ most, the largest difference first."""
    differing = [c for c in checks if abs(c.difference) > 1e-6]
    return sorted(differing, key=lambda c: -abs(c.difference))[:shown]


@operator_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    sort, descending = _fleet_sort(request)
    seen = fleet.overview(now, sort, descending, POOL_AHEAD)
    month_ago = now - timedelta(days=30)
    page = Paginator(seen.statuses, FLEET_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "loans/fleet.html", {
        "sharing_pools": pooled.pools(now), "what_if": _what_if(seen.statuses, now),
        "page": page, "rows": _with_admission(page.object_list),
        "short": sorted((s for s in seen.statuses
                         if s.floor and s.floor.floor.short_gpu_hours > 0),
                        key=lambda s: s.availability)[:FLEET_PAGE_SIZE],
        "sort": sort, "descending": descending, "columns": FLEET_COLUMNS,
        "fleet_query": urlencode({"sort": sort, "dir": "desc" if descending else "asc"}) + "&",
        "capacity": seen.capacity, "whole": seen.whole,
        "nodes": metering_fleet.node_status(now),
        "fleet_alerts": Alert.objects.filter(state=Alert.State.OPEN, tenant__isnull=True),
        "pools": [{"id": f"pool-{k}", "script_id": f"pool-{k}-data",
                   "figure": charts.pool_figure(model, series)}
                  for k, (model, series) in enumerate(seen.pools)],
        "unattributed": metering_fleet.unattributed_gpu_hours(month_ago, now),
        "meter_checks": check_rows(_worst(metering_slurm.recent_checks(
            now, ZoneInfo(settings.TIME_ZONE)))),
        "mismatch_percent": settings.SLURM_MISMATCH_PERCENT,
        "month_ago": month_ago, "now": now,
    })


def _with_admission(statuses) -> list[tuple]:
    """Each contract's row with its overage policy and where its period stands against it
    (open, overage, held), from the figures the row shows: one query for the policies."""
    policies = policies_of([s.contract.pk for s in statuses])
    rows = []
    for s in statuses:
        kind, budget = policies[s.contract.pk]
        f = s.figures
        rows.append((s, kind, admission.state(
            used_gpu_hours=f.used_gpu_hours, committed_gpu_hours=f.committed_gpu_hours,
            overage_cost=f.cost_so_far.overage_cost, policy=kind, budget=budget)))
    return rows


@operator_required
def fleet_csv(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    sort, descending = _fleet_sort(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="fleet.csv"'
    writer = spreadsheet.writer(response)
    writer.writerow([
        "tenant", "plan", "contract", "period_start", "period_end", "committed_gpu_hours",
        "used_gpu_hours", "projected_gpu_hours", "projected_overage_cost", "projected_waste",
        "currency", "days_left", "availability", "guarantee_pct", "short_gpu_hours",
        "credit",
    ])
    for s in fleet.contract_statuses(now, sort, descending):
        f = s.figures
        writer.writerow([
            s.contract.tenant.slug, s.contract.plan.name, s.contract.pk,
            f.period.start.astimezone(s.contract.zone).isoformat(),
            f.period.end.astimezone(s.contract.zone).isoformat(),
            # To the page's precision: GPU-hours to 0.1, money to the currency's minor unit;
            # overage and waste after sharing, as the statement would bill them.
            *(spreadsheet.fixed(hours, 1) for hours in (f.committed_gpu_hours, f.used_gpu_hours,
                                             f.projected_used_gpu_hours)),
            *(spreadsheet.fixed(m, _places(f.terms.currency))
              for m in (s.projected_overage_cost, s.projected_waste)),
            f.terms.currency, spreadsheet.fixed(f.days_left, 1),
            # The floor so far: a share to eight places, as statements keep it.
            *((s.floor.floor.availability, f.terms.guarantee_pct,
               spreadsheet.fixed(s.floor.floor.short_gpu_hours, 1),
               spreadsheet.fixed(s.floor.credit, _places(f.terms.currency)))
              if s.floor else ("", f.terms.guarantee_pct, "", "")),
        ])
    return response


def _places(currency: str) -> int:
    return -minor_unit(currency).as_tuple().exponent
