"""What to sign first, from a history file: the page of `manage.py advise --history`, for
operators (/advise/) and for a tenant's lead (/tenants/<slug>/advise/, linked from a tenant
page without a contract). The file is read, priced and forgotten; a refused form keeps it for
the next try, an hour at most (loans.services.advice.kept_files). A tenant's page may instead
read the tenant's Slurm accounting as imported (`source=slurm`)."""

import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from loans.access import Refused, require, tenant_for_user
from loans.models import Contract
from loans.services.advice import kept_files
from loans.services.advice.first_commitment import NoOnDemandPrice, advise, slurm_history
from loans.services.advice.history import HistoryError, read_history
from loans.services.ledger import dashboard
from loans.web.decorators import operator_required
from metering.usage import slurm

# Under the shipped nginx's client_max_body_size (9 MiB), so the page, not the proxy, says
# what is too large; three years of hourly rows take under 1 MiB.
MAX_BYTES = 8 * 1024 * 1024


class HistoryForm(forms.Form):
    history = forms.FileField(label=gettext_lazy("Usage history"), help_text=gettext_lazy(
        "A CSV of ts,gpus (GPUs in use each hour, times with a UTC offset), or the output of "
        "sacct -P -o JobID,Account,User,Start,End,AllocTRES."))
    term_months = forms.IntegerField(label=gettext_lazy("Term (months)"), min_value=1,
                                     max_value=120, initial=12)
    on_demand_rate = forms.DecimalField(
        label=gettext_lazy("On-demand price per GPU-hour (optional)"), required=False,
        min_value=0.0001, max_value=10**6, decimal_places=4, help_text=gettext_lazy(
            "Empty: an offered plan without a commitment gives it, or else the catalogue's "
            "highest overage rate (the advice says which)."))
    time_zone = forms.CharField(label=gettext_lazy("Time zone of sacct's times"), max_length=64,
                                initial=settings.TIME_ZONE)
    account = forms.CharField(label=gettext_lazy("sacct account (empty: all)"), max_length=100,
                              required=False)
    gaps_as_idle = forms.BooleanField(label=gettext_lazy("Read hours without a row as idle"),
                                      required=False)

    def clean_history(self):
        upload = self.cleaned_data["history"]
        if upload is None:  # not asked for: the page reads Slurm's accounting instead
            return ""
        if upload.size > MAX_BYTES:
            raise forms.ValidationError(_("The file is larger than %(mib)s MiB.") % {
                "mib": MAX_BYTES // 2**20})
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError(_("The file is not UTF-8 text.")) from None

    def clean_time_zone(self):
        name = self.cleaned_data["time_zone"].strip()
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(_("%(name)s is not a time zone (Asia/Shanghai, UTC).")
                                        % {"name": name[:64]}) from None


def _too_often(request: HttpRequest) -> int:
    """Seconds to wait when this user has asked ADVICE_UPLOADS_PER_MINUTE times this minute
    (each reading takes a worker for up to a few seconds), else 0."""
    limit = settings.ADVICE_UPLOADS_PER_MINUTE
    if not limit:
        return 0
    key = f"advice-uploads:{request.user.pk}:{int(time.time() // 60)}"
    cache.add(key, 0, timeout=120)
    if cache.incr(key) > limit:
        return 60 - int(time.time() % 60)
    return 0


def _page(request: HttpRequest, tenant=None) -> HttpResponse:
    context = {"tenant": tenant, "currency": settings.DEFAULT_CURRENCY,
               "from_slurm": tenant is not None and slurm.has_history(tenant.pk)}
    if request.method != "POST":
        context["form"] = HistoryForm()
        return render(request, "loans/advise.html", context)
    wait = _too_often(request)
    if wait:
        context.update(form=HistoryForm(), too_often=_(
            "You have asked %(count)s times this minute; ask again in %(seconds)s seconds.")
            % {"count": settings.ADVICE_UPLOADS_PER_MINUTE, "seconds": wait})
        response = render(request, "loans/advise.html", context, status=429)
        response["Retry-After"] = str(wait)
        return response
    form = HistoryForm(request.POST, request.FILES)
    from_slurm = context["from_slurm"] and request.POST.get("source") == "slurm"
    kept = None if "history" in request.FILES else _kept(request)
    form.fields["history"].required = not (from_slurm or kept)
    context["form"] = form
    if not form.is_valid():
        _keep(request, context, form.cleaned_data.get("history"), kept)
        return render(request, "loans/advise.html", context, status=400)
    data = form.cleaned_data
    text = data["history"] or (kept or {}).get("text", "")
    try:
        history = (slurm_history(tenant.pk, timezone.now()) if from_slurm else read_history(
            text, zone=data["time_zone"], gaps_as_idle=data["gaps_as_idle"],
            account=data["account"], idle_option=_("tick “Read hours without a row as idle”")))
        result = advise(history, term_months=data["term_months"],
                        currency=settings.DEFAULT_CURRENCY, on_demand_rate=data["on_demand_rate"],
                        current=_current(tenant))
        context.update(result=result, options=[result.on_demand, *result.plans])
    except NoOnDemandPrice as error:
        form.add_error("on_demand_rate", _("%(problem)s: give it here.")
                       % {"problem": error.problems[0]})
        _keep(request, context, data["history"], kept)
        return render(request, "loans/advise.html", context, status=400)
    except HistoryError as error:
        context["problems"] = error.problems
        _keep(request, context, data["history"], kept)
        return render(request, "loans/advise.html", context, status=400)
    return render(request, "loans/advise.html", context)


def _current(tenant) -> tuple[str, object] | None:
    """The tenant's contract in force, as a row of the comparison: its own terms today."""
    if tenant is None:
        return None
    now = timezone.now()
    contract = next((c for c in dashboard.contracts_of(tenant)
                     if c.status == Contract.Status.ACTIVE and c.period_at(now)), None)
    if contract is None:
        return None
    return (_("Current contract (%(plan)s)") % {"plan": contract.plan.name},
            contract.terms_at(now))


def _kept(request: HttpRequest) -> dict | None:
    """The file this user uploaded with a form that was refused, where the form sends its
    key back without a new file: a browser cannot fill a file field again."""
    token = request.POST.get("kept", "")
    found = kept_files.kept(request.user.pk, token)
    if found is None:
        return None
    name, text = found
    return {"text": text, "name": name, "token": token}


def _keep(request: HttpRequest, context: dict, text: str | None, kept: dict | None) -> None:
    """Keep an uploaded file for the next try (an hour, for this user only) and say so."""
    upload = request.FILES.get("history")
    if text and upload is not None:
        token = kept_files.keep(request.user.pk, upload.name, text)
        kept = {"text": text, "name": " ".join(upload.name.split())[:200], "token": token,
                "fresh": True}
    if kept:
        # Just sent (`fresh`): kept for the next try; sent before: in use again.
        context["kept"] = {"token": kept["token"], "name": kept["name"],
                           "fresh": kept.get("fresh", False)}
        # ... and the browser may send the form again without a file
        context["form"].fields["history"].required = False


@operator_required
def operators_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


@login_required
def tenant_page(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for_user(request.user, slug)
    try:
        require(request.user, "ask-advice", tenant.pk)
    except Refused as refusal:
        return render(request, "403.html", {"reason": refusal.detail}, status=403)
    return _page(request, tenant)
