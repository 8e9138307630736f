"""The pages a lead reads: the tenant page, its periods CSV and its recommendations (the fleet
page is loans.web.fleet)."""

from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from loans.access import (
    Refused,
    allowed,
    require,
    tenant_for_user,
    tenants_for,
)
from loans.maths.billing import Period
from loans.models import (
    Alert,
    BurstRequest,
    Contract,
    OveragePolicy,
    Recommendation,
    Tenant,
)
from loans.services import exports
from loans.services.advice import decisions
from loans.services.exports import periods
from loans.services.ledger import bills, dashboard, overage, pooled, verdict
from loans.services.ledger import read as ledgers
from loans.web import charts
from loans.web.advice_card import recommendations_of
from loans.web.bursts import form_for as burst_form_for
from loans.web.bursts import queue_places
from metering.usage import slurm as metering_slurm

ALERT_HISTORY = 30
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    return HttpResponseRedirect(static("img/favicon.svg"))


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for the proxy and the demo script: the process answers and the database too."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # any database failure is the same answer to a health check
        return JsonResponse({"status": "database unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Operators land on the fleet; a member of one tenant on its page; others choose."""
    if allowed(request.user, "operator-pages"):
        return redirect("fleet")
    tenants = list(tenants_for(request.user))
    if len(tenants) == 1:
        return redirect("tenant", slug=tenants[0].slug)
    return render(request, "loans/home.html", {"tenants": tenants})


def period_label(period: Period, contract: Contract) -> str:
    first, last = period.local_dates(contract.zone)
    return _("Period %(number)s: %(first)s – %(last)s") % {
        "number": period.index + 1, "first": first, "last": last}


def _contract(tenant: Tenant, request: HttpRequest) -> tuple[list[Contract], Contract | None]:
    contracts = dashboard.contracts_of(tenant)
    wanted = request.GET.get("contract")
    if not wanted:
        return contracts, contracts[0] if contracts else None
    contract = next((c for c in contracts if str(c.pk) == wanted), None)
    if contract is None:
        raise Http404(_("This tenant has no such contract."))
    return contracts, contract


@login_required
def tenant_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A tenant's contract: its ledger, and one period's figures and charts (or the whole
    contract's), with what the lead may decide."""
    tenant = tenant_for_user(request.user, slug)
    contracts, contract = _contract(tenant, request)
    now = timezone.now()
    context = {"tenant": tenant, "contracts": contracts, "contract": contract, "now": now,
               "meter_checks": _meter_checks(request, now, tenant.pk),
               "mismatch_percent": settings.SLURM_MISMATCH_PERCENT}
    if contract is None:
        return render(request, "loans/tenant.html", context)
    try:
        choice = dashboard.pick_period(contract, request.GET.get("period"), now, allow_all=True)
    except dashboard.PeriodChoiceError as error:
        context["error"] = str(error)
        return render(request, "loans/tenant.html", context, status=400)
    ledger = ledgers.read(contract, now)
    context.update(_contract_context(request, tenant, contract, ledger, choice, now))
    pool = pooled.pool_of(contract, now, ledger.groups)
    if context["group_figures"] and pool is not None:
        context.update(_pool(contract, pool))
    if choice == dashboard.WHOLE_CONTRACT:
        context.update(_whole_contract(contract, ledger))
    elif choice is not None:
        asked = (request.GET.get("period") or "").strip() not in ("", "current")
        context.update(_period(contract, ledger, choice, now, pool,
                               context["recommendations"], asked=asked))
    return render(request, "loans/tenant.html", context)


def _pool(contract: Contract, pool: pooled.Pool) -> dict:
    """The sharing group's pooled burn-down beside the team's own, where it shares now."""
    overage, covered = pool.covered(contract.pk)
    own = pool.glance_of(contract.pk)
    return {"pool": pool, "own_remaining": own.remaining_gpu_hours, "team_overage": overage,
            "team_covered": covered}


def _meter_checks(request: HttpRequest, now: datetime, tenant_id: int) -> list:
    """The agents against Slurm's accounting, a week of days, for operators only (the
    difference tells them of a missing agent or a wrong rule; a lead cannot act on it)."""
    if not allowed(request.user, "read-meter-checks"):
        return []
    return check_rows(metering_slurm.recent_checks(now, ZoneInfo(settings.TIME_ZONE),
                                                    tenant_id=tenant_id))


def check_rows(checks: list) -> list[dict]:
    """Each check with its tenant's name and whether it is past the alert's rule."""
    names = Tenant.objects.in_bulk({c.tenant_id for c in checks} - {None}) if checks else {}
    rule = (settings.SLURM_MISMATCH_PERCENT, settings.SLURM_MISMATCH_MIN_GPU_HOURS)
    return [{"check": c, "tenant": names.get(c.tenant_id), "over": c.alarming(*rule)}
            for c in checks]


def _contract_context(request, tenant: Tenant, contract: Contract, ledger, choice, now) -> dict:
    """What the page shows whichever period is chosen: terms, periods, advice, bursts, alerts."""
    user = request.user
    # A sharing group's figures: for its members' leads and operators (loans.access).
    group_figures = allowed(user, "read-group-figures", tenant.pk)
    terms = contract.terms_at(now)
    return {
        "group_figures": group_figures,
        "choice": choice, "ledger": ledger, "zone": contract.zone, "statements": ledger.statements,
        # Each period with what it bills: its statement, or what closing it now would bill.
        "rows": ledger.entries, "table": [(e, bills.of_entry(e)) for e in ledger.entries],
        "terms": terms, "currency": terms.currency,
        "amendments": contract.amendments_in_order(),
        "periods": [(str(r.period.index + 1), period_label(r.period, contract))
                    for r in ledger.entries],
        "recommendations": recommendations_of(contract, now, group_figures=group_figures),
        "bursts": with_places(contract.bursts.filter(
            # Refused ones too, while their window lasts: the lead sees why, not only the
            # operators in the admin.
            state__in=[BurstRequest.State.QUEUED, BurstRequest.State.GRANTED,
                       BurstRequest.State.REJECTED], ends_at__gt=now
        ).order_by("starts_at")),
        "burst_form": burst_form_for(request, contract.pk,
                                     terms.max_quota_gpus - terms.base_quota_gpus)
        if allowed(user, "ask-burst", tenant.pk) else None,
        "can_decide": allowed(user, "decide-recommendation", tenant.pk),
        "overage": overage.describe(contract, now, ledger.current),
        "overage_policies": OveragePolicy.Kind.choices,
        "can_set_overage": allowed(user, "set-overage-policy", tenant.pk),
        "alerts": list(Alert.objects.filter(tenant=tenant).order_by("-opened_at")[
            :ALERT_HISTORY]),
    }


def _whole_contract(contract: Contract, ledger: ledgers.Ledger) -> dict:
    """The contract so far: its periods' hours, with the unused hours of ended periods apart
    from those the open period still has, the commitment of the whole term beside the one to
    date, and its money as billed (loans.services.ledger.bills.whole: statements, fee included,
    pending corrections and what is not stated yet)."""
    rows = ledger.entries
    money = bills.whole(ledger)
    totals = ledgers.totals(rows)
    totals["cost"] = money.total
    # Each period's bill as the whole contract read it (in the order of its entries).
    read = list(zip(rows, money.bills, strict=True))
    totals["unused_ended_gpu_hours"] = sum(
        (b.unused_gpu_hours for r, b in read if r.state != "open"), Decimal(0))
    totals["left_open_gpu_hours"] = sum(
        (b.unused_gpu_hours for r, b in read if r.state == "open"), Decimal(0))
    totals["term_committed_gpu_hours"] = sum(
        (contract.terms_for(p.index).committed_gpu_hours for p in contract.periods()),
        Decimal(0))
    return {"totals": totals, "whole": money,
            "charts": {"periods": charts.periods_figure(rows, contract.zone)}}


def _period(contract: Contract, ledger, period: Period, now, pool: pooled.Pool | None,
            recommendations=(), *, asked: bool = False) -> dict:
    entry = ledger.entry_for(period)
    figures = dashboard.figures(contract, period, now, entry)
    zone = contract.zone
    bill = bills.of_entry(entry)
    projected = bills.projected(contract.pk, entry.terms, period,
                                 figures.projected_used_gpu_hours, pool, entry.credit) \
        if entry.state == "open" else None
    said = verdict.verdict(projected=projected, exhaustion=figures.projected_exhaustion,
                           now=now, zone=zone, recommendations=recommendations) \
        if projected is not None else None
    past = {}
    if entry.state != "open" and asked:
        # A past period asked for: its own statement and those that corrected it, and not
        # the group's pool now (the current period's). An ended contract opens on its last
        # period with every statement.
        past = {"pool": None, "statements": [
            s for s in ledger.statements if s.period_index == period.index
            or any(c.period_index == period.index for c in s.corrections.all())]}
    return {
        **past,
        "figures": figures, "entry": entry, "selected": str(period.index + 1),
        "bill": bill, "projected": projected, "verdict": said,
        "charts": {"burndown": charts.burndown_figure(figures, zone),
                   "cumulative": charts.cumulative_figure(figures, zone),
                   "hourly": charts.hourly_figure(figures, zone)},
        # In the page's language: a page reached by its /zh-hans/ URL sends no language
        # cookie or header that says so to the API (no language prefix there).
        "heatmap_url": reverse("api-contract-heatmap", args=[contract.pk])
        + f"?period={period.index + 1}&lang={translation.get_language()}",
    }


def with_places(shown) -> list[BurstRequest]:
    """The bursts shown, each queued one with its place in its pool's queue (`place`)."""
    shown = list(shown)
    places = queue_places(shown)
    for b in shown:
        b.place = places.get(b.pk)
    return shown


@require_POST
@login_required
def decide_recommendation(request: HttpRequest, slug: str, pk: int, decision: str
                          ) -> HttpResponse:
    """A lead accepts (a request for an operator to apply) or dismisses a recommendation."""
    tenant = tenant_for_user(request.user, slug)
    rec = Recommendation.objects.filter(pk=pk, contract__tenant=tenant).first()
    if rec is None:
        raise Http404(_("No such recommendation."))
    try:
        require(request.user, "decide-recommendation", tenant.pk)
    except Refused as refusal:
        return render(request, "403.html", {"reason": refusal.detail}, status=403)
    accept = {"accept": True, "dismiss": False}[decision]  # the URL allows these two
    if not decisions.decide(rec, accept=accept, by=request.user, at=timezone.now()):
        messages.error(request, _("This recommendation was already decided or replaced."))
    elif accept:
        messages.success(request, _("Accepted: an operator will apply it."))
    else:
        messages.success(request, _("Dismissed."))
    return redirect(f"{reverse('tenant', args=[slug])}?contract={rec.contract_id}")


@login_required
def periods_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Every started period of a contract, closed or not, as the periods table shows it: the
    figures at the usage the meter holds now, and what its statements billed so far."""
    tenant = tenant_for_user(request.user, slug)
    _contracts, contract = _contract(tenant, request)
    if contract is None:
        raise Http404(_("This tenant has no contract."))
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{exports.filename(contract, periods.NAME)}"')
    exports.write_csv(exports.table(periods.NAME, ledgers.read(contract, timezone.now())),
                      response)
    return response

