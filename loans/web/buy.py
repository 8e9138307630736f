"""Buy vs loan: a lead compares buying GPUs with their contract or a catalogue plan, on their
measured usage where there is some. The form and the figures are loans.services.advice.buy's,
shared with the API."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from loans.access import tenant_for_user
from loans.services.advice.buy import (
    BuyForm,
    contract_of,
    evaluate,
    loan_of,
    measured_utilisation,
    with_defaults,
)
from loans.web import charts


@login_required
def page(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for_user(request.user, slug)
    contract = contract_of(tenant)
    context = {"tenant": tenant, "contract": contract}
    if contract is None:
        return render(request, "loans/buy.html", context)
    now = timezone.now()
    form = BuyForm(with_defaults(contract, request.GET.dict(), now), contract=contract)
    context.update(form=form, currency=contract.terms().currency,
                   measured=measured_utilisation(contract, contract.terms().base_quota_gpus or 1,
                                                 now))
    if form.is_valid():
        result = evaluate(form, contract)
        context.update(result=result, loan=loan_of(form, contract),
                       gpus=form.cleaned_data["gpus"],
                       chart=charts.buy_figure(result, contract.terms().currency))
    return render(request, "loans/buy.html", context, status=200 if form.is_valid() else 400)
