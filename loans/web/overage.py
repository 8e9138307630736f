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
from loans.services import overage

CARD = "overage"  # messages tagged so show in the overage card


@login_required
@require_POST
def set_policy(request: HttpRequest, slug: str, contract_id: int) -> HttpResponse:
    tenant, contract = tenant_contract_for_user(request.user, slug, contract_id)
    back = redirect(f"{reverse('tenant', args=[slug])}?contract={contract_id}#overage")
    try:
        require(request.user, "set-overage-policy", tenant.pk)
        overage.set_policy(contract, kind=request.POST.get("policy", ""),
                           budget=overage.read_budget(request.POST.get("budget")),
                           by=request.user, now=timezone.now())
    except Refused as refusal:
        messages.error(request, str(refusal), extra_tags=CARD)
        return back
    except ValidationError as error:
        for text in error.messages:
            messages.error(request, text, extra_tags=CARD)
        return back
    messages.success(request, _("Overage policy saved. The scheduler holds jobs to it from its "
                                "next run."), extra_tags=CARD)
    return back
