"""Which plan of the catalogue to hold: every offered plan for the same GPUs priced over the
periods a change made now would cover, on the same demand model as the commitment and the base
quota (loans.maths.recommend.TermAdvice).

Over those periods each option costs its expected bills (the model's outcomes priced at the
plan's numbers) plus:
- its upfront fee, the share of its term those periods are (a 36-month plan's fee is not all
  spent on 10 months);
- mid-term, what is still owed on the current commitment: the committed money already signed
  for the rest of the term is due whatever the team moves to, so a plan that commits less
  money still pays the difference each period;
- at renewal (the last period), keeping the current terms means signing them again, their
  own upfront fee included.

A plan qualifies only if its base quota is at least the one the demand model needs (at most
BURST_HOURS_PERCENT of the hours ahead needing a burst), its cap holds the peak, and its
guarantee level is at least the current terms': a cheaper plan that guarantees less than the
team uses, or less often, is no advice. Where the plans' service credits differ, each option's
cost is less what its tiers would have credited a period at the availability the team's
statements measured (DESIGN "The floor"), on average."""

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.utils.translation import gettext_noop

from core.wording import Wording, worded
from loans.maths import billing, guarantee, quotas, recommend
from loans.maths.billing import money
from loans.models import Contract, Plan

HISTORY_PERIODS = 3  # a plan is a bigger change than a commitment: three whole periods first


@dataclass(frozen=True)
class Option:
    plan: str
    cost: Decimal  # expected over the periods, fee share, still owed and credits included
    fee_share: Decimal
    owed: Decimal  # still owed on the current commitment (mid-term)
    fits_peak: bool
    guarantees_base: bool
    guarantee_pct: Decimal = Decimal(100)
    guarantees_as_often: bool = True  # its guarantee level is at least the current terms'
    credits: Decimal = Decimal(0)  # expected service credits over the periods (negative)

    def as_evidence(self) -> dict:
        return {"plan": self.plan, "cost": str(self.cost), "fits_peak": self.fits_peak,
                "guarantees_base": self.guarantees_base,
                "upfront_fee_share": str(self.fee_share), "still_owed": str(self.owed),
                "guarantee_pct": str(self.guarantee_pct),
                "guarantees_as_often": self.guarantees_as_often,
                "expected_credits": str(self.credits)}


def measured_availability(contract: Contract) -> list[Decimal]:
    """The availability each of the contract's statements measured (the floor)."""
    return [a for a in contract.statements.filter(kind="period", availability__isnull=False)
            .order_by("period_index").values_list("availability", flat=True)]


def expected_credits(committed: Decimal, rate: Decimal, tiers: str, measured: list[Decimal],
                     months: int, currency: str) -> Decimal:
    """What `tiers` would credit over `months` periods, each at the average credit the
    measured availabilities earn (0 with no measure or no tiers)."""
    if not measured or not tiers:
        return Decimal(0)
    committed_cost = money(committed * rate, currency)
    parsed = guarantee.parse_tiers(tiers)
    each = [billing.service_credit(committed_cost, guarantee.credit_pct(float(a), parsed),
                                   currency) for a in measured]
    return money(sum(each, Decimal(0)) / len(each) * months, currency)


@dataclass(frozen=True)
class PlanChoice:
    best: Plan
    saving: Decimal  # expected, per period
    wording: Wording
    evidence: dict


def expected_cost(term: recommend.TermAdvice, committed: Decimal, committed_rate: Decimal,
                  overage_rate: Decimal, currency: str) -> Decimal:
    return money(Decimal(repr(term.expected_total(float(committed), committed_rate,
                                                  overage_rate))), currency)


def best_plan(contract: Contract, peaks: list[float], term: recommend.TermAdvice | None,
              renewal: bool) -> PlanChoice | None:
    """The cheapest qualifying plan over the periods ahead, if it beats the current terms by
    PLAN_SWITCH_MARGIN_PERCENT, else None."""
    if term is None or term.periods < HISTORY_PERIODS or not peaks:
        return None
    months = len(term.p50)
    terms = contract.terms()
    peak = max(peaks)
    needed = quotas.base_for_bursts(peaks, term.growth, settings.BURST_HOURS_PERCENT / 100)
    own_fee = terms.upfront_fee if renewal else Decimal(0)
    measured = measured_availability(contract)
    own_credits = expected_credits(terms.committed_gpu_hours, terms.committed_rate,
                                   terms.credit_tiers, measured, months, terms.currency)
    own = expected_cost(term, terms.committed_gpu_hours, terms.committed_rate,
                        terms.overage_rate, terms.currency) + own_fee + own_credits
    signed_money = terms.committed_gpu_hours * terms.committed_rate
    options = []
    for plan in Plan.objects.filter(is_offered=True, currency=terms.currency).exclude(
            pk=contract.plan_id):
        if plan.gpu_model and plan.gpu_model != contract.plan.gpu_model:
            continue
        fee = money(plan.upfront_fee * min(months, plan.term_months) / plan.term_months,
                    terms.currency)
        owed = Decimal(0) if renewal else money(
            max(Decimal(0), signed_money - plan.committed_gpu_hours * plan.committed_rate)
            * months, terms.currency)
        credits = expected_credits(plan.committed_gpu_hours, plan.committed_rate,
                                   plan.credit_tiers, measured, months, terms.currency)
        cost = expected_cost(term, plan.committed_gpu_hours, plan.committed_rate,
                             plan.effective_overage_rate(), terms.currency) + fee + owed + credits
        options.append((plan, Option(plan.name, cost, fee, owed, plan.max_quota_gpus >= peak,
                                     plan.base_quota_gpus >= needed, plan.guarantee_pct,
                                     plan.guarantee_pct >= terms.guarantee_pct, credits)))
    options.sort(key=lambda o: o[1].cost)
    feasible = [(plan, o) for plan, o in options
                if o.fits_peak and o.guarantees_base and o.guarantees_as_often]
    margin = Decimal(settings.PLAN_SWITCH_MARGIN_PERCENT) / 100
    if not feasible or feasible[0][1].cost > own * (1 - margin):
        return None
    best, option = feasible[0]
    facts = {"plan": best.name, "cost": f"{option.cost:,.2f}", "currency": terms.currency,
             "own": f"{own:,.2f}", "months": months, "fee": f"{option.fee_share:,.2f}",
             "owed": f"{option.owed:,.2f}", "own_fee": f"{own_fee:,.2f}",
             "base": f"{best.base_quota_gpus:,}", "needed": f"{needed:,}"}
    if renewal:
        wording = worded(gettext_noop(
            "For the next term (%(months)s periods), %(plan)s is expected to cost "
            "%(cost)s %(currency)s, %(fee)s of its upfront fee included, against %(own)s "
            "renewing the current terms (their upfront fee of %(own_fee)s included). It "
            "guarantees %(base)s GPUs; the forecast needs %(needed)s."), facts)
    else:
        wording = worded(gettext_noop(
            "Over the %(months)s periods left in the term, %(plan)s is expected to cost "
            "%(cost)s %(currency)s, %(fee)s of its upfront fee and the %(owed)s still owed "
            "on the current commitment included, against %(own)s on the current terms. It "
            "guarantees %(base)s GPUs; the forecast needs %(needed)s."), facts)
    return PlanChoice(
        best=best, saving=money((own - option.cost) / months, terms.currency), wording=wording,
        evidence={"current_cost": str(own), "periods": months, "renewal": renewal,
                  "peak_concurrent_gpus": peak, "base_quota_needed": needed,
                  "current_upfront_fee": str(own_fee),
                  "current_fits_peak": terms.max_quota_gpus >= peak,
                  "current_guarantees_base": terms.base_quota_gpus >= needed,
                  "current_guarantee_pct": str(terms.guarantee_pct),
                  "current_expected_credits": str(own_credits),
                  "measured_availability": [str(a) for a in measured],
                  "plans": [o.as_evidence() for _plan, o in options]})
