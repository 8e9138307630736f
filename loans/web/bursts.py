"""The tenant page's burst requests: a lead asks for GPUs above the base quota and cancels."""

import secrets

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from loans.access import Refused, require, tenant_contract_for_user, tenant_for_user
from loans.models import BurstRequest
from loans.services import bursts


class BurstForm(forms.Form):
    gpus = forms.IntegerField(label=gettext_lazy("Extra GPUs"), min_value=1,
                              max_value=bursts.MAX_GPUS)
    starts_at = forms.DateTimeField(label=gettext_lazy("From"),
                                    widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    ends_at = forms.DateTimeField(label=gettext_lazy("Until"),
                                  widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    reason = forms.CharField(label=gettext_lazy("Reason"), max_length=500)
    # A fresh key with every form shown: the same form sent twice asks once.
    submission = forms.CharField(required=False, max_length=bursts.SUBMISSION_MAX,
                                 widget=forms.HiddenInput)

    def clean(self):
        """Every field's error at once: an end before the start is named beside a GPU count
        over the cap, not after it is fixed."""
        data = super().clean()
        start, end = data.get("starts_at"), data.get("ends_at")
        if start and end and end <= start:
            self.add_error("ends_at", _("The end must be after the start."))
        return data


DRAFT = "burst-draft"  # the session's copy of a form that was refused, to show it again
CARD = "bursts"  # messages tagged so show in the burst card, beside the form that was used


def form_for(request: HttpRequest, contract_id: int, most: int | None = None) -> BurstForm:
    """The form the tenant page shows: as the lead last sent it where that was refused (once),
    else empty, each with a new submission key; its GPU field allows at most `most` (what fits
    under the max quota above the base), and says so."""
    draft = request.session.pop(DRAFT, None)
    values = {}
    if isinstance(draft, dict) and draft.get("contract") == contract_id:
        values = dict(draft.get("values") or {})
    key = values.get("submission") or ""
    if not (key and bursts.valid_submission(key)):
        values["submission"] = secrets.token_urlsafe(16)
    form = BurstForm(initial=values)
    if most is not None and most > 0:
        field = form.fields["gpus"]
        field.max_value = most
        field.widget.attrs["max"] = most
        field.label = _("Extra GPUs (at most %(most)s)") % {"most": most}
    return form


def _back(slug: str, contract_id: int) -> HttpResponse:
    return redirect(f"{reverse('tenant', args=[slug])}?contract={contract_id}#bursts")


def _refused(request: HttpRequest, slug: str, contract_id: int, *texts: str) -> HttpResponse:
    """Say why in the burst card and keep what was typed."""
    for text in texts:
        messages.error(request, text, extra_tags=CARD)
    request.session[DRAFT] = {"contract": contract_id, "values": {
        name: request.POST.get(name, "")[:500] for name in BurstForm.base_fields}}
    return _back(slug, contract_id)


@require_POST
@login_required
def ask(request: HttpRequest, slug: str, contract_id: int) -> HttpResponse:
    tenant, contract = tenant_contract_for_user(request.user, slug, contract_id)
    try:
        require(request.user, "ask-burst", tenant.pk)
    except Refused as refusal:
        messages.error(request, refusal.detail, extra_tags=CARD)
        return _back(slug, contract.pk)
    # Times in the form are the contract's wall clock.
    with timezone.override(contract.zone):
        form = BurstForm(request.POST)
        valid = form.is_valid()
    terms = contract.terms_at(timezone.now())
    most = terms.max_quota_gpus - terms.base_quota_gpus
    if form.cleaned_data.get("gpus", 0) > most:
        form.add_error("gpus", _("At most %(most)s: the max quota of %(cap)s GPUs less the base "
                                 "quota of %(base)s.") % {"most": most,
                                                          "cap": terms.max_quota_gpus,
                                                          "base": terms.base_quota_gpus})
        valid = False
    if not valid:
        return _refused(request, slug, contract.pk, *(
            f"{form.fields[field].label if field in form.fields else ''}: {' '.join(errors)}"
            for field, errors in form.errors.items()))
    try:
        burst = bursts.submit(contract=contract, user=request.user, now=timezone.now(),
                              **form.cleaned_data)
    except bursts.BurstError as error:
        return _refused(request, slug, contract.pk, str(error))
    if burst.repeated:
        messages.info(request, _("This request was sent already; it is %(state)s.") % {
            "state": burst.get_state_display()}, extra_tags=CARD)
        return _back(slug, contract.pk)
    level = messages.ERROR if burst.state == BurstRequest.State.REJECTED else messages.SUCCESS
    # The note says the state and why ("granted: the pool had room"), in the reader's words.
    messages.add_message(request, level, capfirst(burst.text or burst.get_state_display()),
                         extra_tags=CARD)
    return _back(slug, contract.pk)


def queue_places(shown) -> dict[int, int]:
    """Each queued request's place in its pool's queue (1 is next), as the queue job takes
    them, by id."""
    queued = [b for b in shown if b.state == BurstRequest.State.QUEUED]
    if not queued:
        return {}
    pools = {bursts.pool_of(b.contract) for b in queued}
    ahead: dict[str, int] = {}
    places = {}
    for b in BurstRequest.objects.filter(state=BurstRequest.State.QUEUED,
                                         contract__gpu_model__in=pools
                                         ).select_related("contract"):
        pool = b.contract.gpu_model
        ahead[pool] = ahead.get(pool, 0) + 1
        places[b.pk] = ahead[pool]
    return {b.pk: places[b.pk] for b in queued if b.pk in places}


@require_POST
@login_required
def cancel(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    tenant = tenant_for_user(request.user, slug)
    burst = BurstRequest.objects.filter(pk=pk, contract__tenant=tenant).select_related(
        "contract__plan").first()
    if burst is None:
        raise Http404(_("No such burst request."))
    try:
        require(request.user, "cancel-burst", tenant.pk)
    except Refused as refusal:
        messages.error(request, refusal.detail, extra_tags=CARD)
    else:
        try:
            bursts.decide(burst, "cancel", actor=request.user, now=timezone.now(),
                          note=_("cancelled by the lead"))
            messages.success(request, _("Burst request cancelled."), extra_tags=CARD)
        except bursts.BurstError as error:
            messages.error(request, str(error), extra_tags=CARD)
    return _back(slug, burst.contract_id)
