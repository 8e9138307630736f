"""The operators' alerts page: every alert outside the admin, open ones first by default,
filtered by state, kind and tenant (or the operators' own, which no tenant owns), a hundred a
page. The fleet's open-alert counts link here."""

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from loans.models import Alert, Tenant
from loans.web.decorators import operator_required

PAGE_SIZE = 100
STATES = ("open", "resolved", "all")
OPERATORS_OWN = "-"  # the tenant filter's value for alerts no tenant owns


@operator_required
def alerts_page(request: HttpRequest) -> HttpResponse:
    params, problems = request.GET, []
    state = params.get("state", "open")
    if state not in STATES:
        problems.append(_("Unknown state %(value)s; showing open alerts.") % {
            "value": state[:40]})
        state = "open"
    kind = params.get("kind", "")
    if kind and kind not in Alert.Kind.values:
        problems.append(_("Unknown kind %(value)s; showing every kind.") % {"value": kind[:40]})
        kind = ""
    tenant = params.get("tenant", "")
    tenants = list(Tenant.objects.order_by("slug"))
    if tenant and tenant != OPERATORS_OWN and tenant not in {t.slug for t in tenants}:
        problems.append(_("No tenant %(value)s; showing every tenant's.") % {
            "value": tenant[:40]})
        tenant = ""

    alerts = Alert.objects.select_related("tenant").order_by("-opened_at", "-pk")
    if state != "all":
        alerts = alerts.filter(state=state)
    if tenant == OPERATORS_OWN:
        alerts = alerts.filter(tenant__isnull=True)
    elif tenant:
        alerts = alerts.filter(tenant__slug=tenant)
    # order_by(): the list's ordering would otherwise join the GROUP BY (a count per moment).
    by_kind = dict(alerts.order_by().values("kind").annotate(n=Count("pk"))
                   .values_list("kind", "n"))
    if kind:
        alerts = alerts.filter(kind=kind)
    kept = {"state": state, "kind": kind, "tenant": tenant}
    return render(request, "loans/alerts.html", {
        "page": Paginator(alerts, PAGE_SIZE).get_page(params.get("page")),
        "query": urlencode(kept) + "&", "problems": problems, **kept,
        "kinds": [(value, label, by_kind.get(value, 0)) for value, label in Alert.Kind.choices],
        "tenants": tenants, "operators_own": OPERATORS_OWN,
        "states": [("open", _("Open")), ("resolved", _("Resolved")), ("all", _("All"))],
    })
