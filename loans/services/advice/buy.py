"""Buy vs loan: the comparison's input (a form, so the page and the API validate alike) and its
figures, from a lead's contract or a catalogue plan and their measured usage. The page
(loans.web.buy) and the API (loans.api.buy) both answer from here."""

from datetime import timedelta
from decimal import Decimal

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from loans.maths import buyvsloan
from loans.models import Contract, Plan, Tenant
from loans.services.ledger import dashboard
from metering import usage

LOOKBACK = timedelta(days=90)
DEFAULTS = {"price_per_gpu": Decimal(220_000), "overhead_per_gpu_year": Decimal(30_000),
            "maintenance_percent": Decimal(8), "depreciation_years": 4}


class BuyForm(forms.Form):
    target = forms.ChoiceField(label=gettext_lazy("Compare with"))
    gpus = forms.IntegerField(label=gettext_lazy("GPUs"), min_value=1, max_value=100_000)
    price_per_gpu = forms.DecimalField(label=gettext_lazy("Price per GPU"), min_value=0,
                                       max_value=10**9, decimal_places=2)
    overhead_per_gpu_year = forms.DecimalField(
        label=gettext_lazy("Server and facility overhead per GPU-year"), min_value=0,
        max_value=10**8, decimal_places=2)
    maintenance_percent = forms.DecimalField(
        label=gettext_lazy("Maintenance (percent of the price, a year)"), min_value=0,
        max_value=100, decimal_places=2)
    depreciation_years = forms.IntegerField(label=gettext_lazy("Depreciation (years)"),
                                            min_value=1, max_value=15)
    utilisation_percent = forms.DecimalField(label=gettext_lazy("Expected utilisation (percent)"),
                                             min_value=Decimal("0.1"), max_value=100,
                                             decimal_places=2)
    months = forms.IntegerField(label=gettext_lazy("Over (months)"), min_value=1,
                                max_value=120)

    def __init__(self, *args, contract: Contract, **kwargs):
        super().__init__(*args, **kwargs)
        # The contract's own currency, as signed: a plan edited since may be in another.
        plans = Plan.objects.filter(is_offered=True, currency=contract.terms().currency)
        self.fields["target"].choices = [("contract", _("My contract (%(plan)s)") % {
            "plan": contract.plan.name})] + [(str(p.pk), p.name) for p in plans]
        self.plans = {str(p.pk): p for p in plans}


def measured_utilisation(contract: Contract, gpus: int, now) -> Decimal | None:
    """Allocated GPU-hours over the last 90 days (or since the contract began) against `gpus`
    held all the time, percent."""
    start = max(now - LOOKBACK, contract.periods()[0].start)
    hours = Decimal(repr((now - start).total_seconds() / 3600))
    totals = usage.tenant_totals(contract.tenant_id, start, now)
    if not totals.sample_count or hours <= 0:
        return None
    share = Decimal(repr(totals.allocated_gpu_hours)) / (gpus * hours)
    return min(Decimal(100), (share * 100).quantize(Decimal("0.1")))


def initial(contract: Contract, now) -> dict:
    gpus = contract.terms().base_quota_gpus or 1
    measured = measured_utilisation(contract, gpus, now)
    return {"target": "contract", "gpus": gpus, **DEFAULTS,
            "utilisation_percent": measured if measured else Decimal(60),
            "months": contract.terms().term_months}


def with_defaults(contract: Contract, given: dict, now) -> dict:
    """The form's data: what was given, the defaults for the rest."""
    return {**{k: str(v) for k, v in initial(contract, now).items()}, **given}


def loan_of(form: BuyForm, contract: Contract) -> buyvsloan.Loan:
    target = form.cleaned_data["target"]
    if target == "contract":
        terms = contract.terms()
        return buyvsloan.Loan(contract.plan.name, terms.committed_gpu_hours,
                              terms.committed_rate, terms.overage_rate, terms.upfront_fee)
    plan = form.plans[target]
    return buyvsloan.Loan(plan.name, plan.committed_gpu_hours, plan.committed_rate,
                          plan.effective_overage_rate(), plan.upfront_fee)


def evaluate(form: BuyForm, contract: Contract) -> buyvsloan.Comparison:
    data = form.cleaned_data
    purchase = buyvsloan.Purchase(
        gpus=data["gpus"], price_per_gpu=data["price_per_gpu"],
        overhead_per_gpu_year=data["overhead_per_gpu_year"],
        maintenance_share=data["maintenance_percent"] / 100,
        depreciation_years=data["depreciation_years"])
    return buyvsloan.compare(purchase, loan_of(form, contract),
                             data["utilisation_percent"] / 100, data["months"],
                             currency=contract.terms().currency)


def contract_of(tenant: Tenant) -> Contract | None:
    contracts = dashboard.contracts_of(tenant)
    return contracts[0] if contracts else None
