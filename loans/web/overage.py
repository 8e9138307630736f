"""The tenant page's overage policy: its lead (or an operator) sets what the contract may use
past its commitment each period."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from loans.access import Refused, require, tenant_contract_for_user
from loans.models import OveragePolicy
from loans.services.alerts import conditions as alerts
from loans.services.ledger import overage

CARD = "overage"  # messages tagged so show in the overage card


@login_required
@require_POST
def set_policy(request: HttpRequest, slug: str, contract_id: int) -> HttpResponse:
    tenant, contract = tenant_contract_for_user(request.user, slug, contract_id)
    back = redirect(f"{reverse('tenant', args=[slug])}?contract={contract_id}#overage")
    try:
        require(request.user, "set-overage-policy", tenant.pk)
        now, kind = timezone.now(), request.POST.get("policy", "")
        budget = overage.read_budget(request.POST.get("budget"))
        # Say what the choice does before it takes effect: a hold that starts now is
        # confirmed first, not found out from jobs that wait.
        held = overage.holds_now(contract, kind, budget, now) \
            if kind in OveragePolicy.Kind.values and (kind != "budget" or budget is not None) \
            and (budget is None or budget.is_finite()) else None
        if held and request.POST.get("confirm") != "yes":
            messages.error(request, _("Not saved yet. %(effect)s Tick “Confirm a hold that "
                                      "starts now” and save again.") % {"effect": held},
                           extra_tags=CARD)
            return back
        overage.set_policy(contract, kind=kind, budget=budget, by=request.user, now=now)
        alerts.refresh_contract_alerts(contract, now)
    except Refused as refusal:
        messages.error(request, str(refusal), extra_tags=CARD)
        return back
    except ValidationError as error:
        for text in error.messages:
            messages.error(request, text, extra_tags=CARD)
        return back
    saved = _("Overage policy saved. The scheduler holds jobs to it from its next run.")
    messages.success(request, f"{saved} {held}" if held else saved, extra_tags=CARD)
    return back
