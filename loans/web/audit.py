"""The audit log's pages: operators read every entry (/audit/), filtered by tenant, kind of
object, person and date, fifty a page, and export what they filtered as CSV; a tenant's leads
read their own tenant's entries (/tenants/<slug>/audit/). What is logged: config.audit."""

from datetime import date
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from core import spreadsheet
from loans.access import allowed, tenant_for_user
from loans.models import Tenant
from loans.services.audit import read
from loans.web.decorators import operator_required

PAGE_SIZE = 50


def _day(raw: str, problems: list[str], label: str) -> date | None:
    if not raw:
        return None
    try:
        return date.fromisoformat(raw.strip())
    except ValueError:
        problems.append(_("%(field)s must be a day written 2026-11-20; %(value)s is not one, so "
                          "it is not applied.") % {"field": label, "value": raw[:40]})
        return None


def _filters(request: HttpRequest, tenant: Tenant | None) -> tuple[read.Filters, dict, list]:
    params, problems = request.GET, []
    kinds = dict(read.kinds())
    kind_raw = params.get("kind", "")
    kind = int(kind_raw) if kind_raw.isdigit() and int(kind_raw) in kinds else None
    if kind_raw and kind is None:
        problems.append(_("Unknown kind %(value)s; showing every kind.") % {
            "value": kind_raw[:40]})
    slug = tenant.slug if tenant is not None else params.get("tenant", "")
    if tenant is None and slug:
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            problems.append(_("No tenant %(value)s; showing every tenant's.") % {
                "value": slug[:40]})
            slug = ""
    since = _day(params.get("since", ""), problems, _("From"))
    until = _day(params.get("until", ""), problems, _("To"))
    if since and until and until < since:
        problems.append(_("The last day is before the first; showing from the first day on."))
        until = None
    person = params.get("person", "").strip()[:150]
    filters = read.Filters(tenant=tenant.pk if tenant else None, kind=kind, person=person,
                           since=since, until=until)
    kept = {"tenant": slug, "kind": kind_raw if kind else "", "person": person,
            "since": since.isoformat() if since else "", "until": until.isoformat() if until
            else ""}
    return filters, kept, problems


def _page(request: HttpRequest, tenant: Tenant | None) -> HttpResponse:
    filters, kept, problems = _filters(request, tenant)
    page = Paginator(read.entries(filters), PAGE_SIZE).get_page(request.GET.get("page"))
    seen = list(page.object_list)
    names = read.tenant_names(seen)
    rows = [{"entry": e, "who": read.who(e), "changes": read.changes(e, shown=True),
             "action": read.ACTIONS.get(e.action, ""), "kind": _kind_name(e),
             "tenant": names.get((e.additional_data or {}).get("tenant"), "")} for e in seen]
    return render(request, "loans/audit.html", {
        "page": page, "rows": rows, "problems": problems, **kept, "tenant": tenant,
        "tenant_slug": kept["tenant"],
        "query": urlencode({k: v for k, v in kept.items() if v}) + "&",
        "kinds": read.kinds(),
        "tenants": [] if tenant else list(Tenant.objects.order_by("slug")),
    }, status=400 if problems else 200)


def _kind_name(entry) -> str:
    model = entry.content_type.model_class()
    return str(model._meta.verbose_name) if model is not None else entry.content_type.model


def _csv(request: HttpRequest, tenant: Tenant | None, name: str) -> HttpResponse:
    filters, _kept, problems = _filters(request, tenant)
    if problems:
        return HttpResponse("\n".join(problems), status=400,
                            content_type="text/plain; charset=utf-8")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = spreadsheet.writer(response)
    writer.writerow(read.COLUMNS)
    writer.writerows(read.rows(read.entries(filters)))  # read a thousand entries at a time
    return response


@operator_required
def audit_page(request: HttpRequest) -> HttpResponse:
    return _page(request, None)


@operator_required
def audit_csv(request: HttpRequest) -> HttpResponse:
    return _csv(request, None, "audit.csv")


def _tenant(request: HttpRequest, slug: str) -> Tenant | None:
    tenant = tenant_for_user(request.user, slug)
    return tenant if allowed(request.user, "read-audit", tenant.pk) else None


@login_required
def tenant_audit_page(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant(request, slug)
    if tenant is None:
        return render(request, "403.html", status=403)
    return _page(request, tenant)


@login_required
def tenant_audit_csv(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant(request, slug)
    if tenant is None:
        return render(request, "403.html", status=403)
    return _csv(request, tenant, f"audit-{tenant.slug}.csv")
