"""A contract's overage policy: set (by its lead or an operator, kept with who and when) and
described for the tenant page and the API: what it means in GPU-hours at the contract's
overage rate, this period."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from loans.maths import admission, billing
from loans.models import Contract, OveragePolicy
from loans.services.ledger import read as ledgers


@dataclass(frozen=True)
class Described:
    kind: str
    budget: Decimal | None
    currency: str
    overage_gpu_hours: Decimal | None  # what the policy allows past the commitment; None: all
    set_by: str | None
    set_at: datetime | None
    state: str | None  # open, overage or held this period (admission.state); None: no period


def admission_state(contract: Contract, kind: str, budget: Decimal | None, at: datetime,
                    entry: ledgers.PeriodEntry | None = None) -> str | None:
    """Where the contract's period at `at` stands against its commitment and policy, as the
    ledger meters it (the Kueue hold and the pages read it; `entry`: that period's, where
    the caller has read the ledger)."""
    period = contract.period_at(at)
    if period is None:
        return None
    if entry is None or entry.period.index != period.index:
        entry = ledgers.period_entry(contract, period, at)
    return admission.state(used_gpu_hours=entry.metered,
                           committed_gpu_hours=entry.terms.committed_gpu_hours,
                           overage_cost=entry.terms.cost(entry.metered).overage_cost,
                           policy=kind, budget=budget)


def describe(contract: Contract, at: datetime, entry: ledgers.PeriodEntry | None = None
             ) -> Described:
    """The policy in force at `at`, what it means in GPU-hours this period and where the
    period stands; `entry`: the ledger's entry of the period at `at`, where the caller has
    read it (its terms and usage are used, not read again)."""
    latest = contract.overage_policies.select_related("set_by").first()
    kind, budget = (latest.kind, latest.budget) if latest else (OveragePolicy.Kind.ALLOW, None)
    period = contract.period_at(at)
    if entry is not None and (period is None or entry.period.index != period.index):
        entry = None
    terms = entry.terms if entry is not None else contract.terms_at(at)
    limits = admission.budgets(committed_gpu_hours=terms.committed_gpu_hours,
                               overage_rate=terms.overage_rate, policy=kind, budget=budget)
    hours = limits.overage_gpu_hours()
    return Described(kind, budget, terms.currency,
                     None if hours is None else billing.gpu_hours(hours),
                     latest.set_by.get_username() if latest and latest.set_by else None,
                     latest.set_at if latest else None,
                     admission_state(contract, kind, budget, at, entry))


def holds_now(contract: Contract, kind: str, budget: Decimal | None, now: datetime
              ) -> str | None:
    """What a policy would do at once, said before it takes effect: a sentence where it would
    hold new jobs now (the period is past its commitment, and on hold or past the budget),
    else None. The hold counts what is past the commitment, before sharing (DESIGN)."""
    period = contract.period_at(now)
    if period is None:
        return None
    entry = ledgers.period_entry(contract, period, now)
    spent = entry.terms.cost(entry.metered).overage_cost
    if admission_state(contract, kind, budget, now, entry) != admission.HELD:
        return None
    currency = entry.terms.currency
    if kind == OveragePolicy.Kind.HOLD:
        return _("New jobs will be held now: this period's %(committed)s committed GPU-h are "
                 "spent.") % {"committed": f"{entry.terms.committed_gpu_hours:,.0f}"}
    return _("New jobs will be held now: %(spent)s %(currency)s past the commitment is "
             "already spent this period, at or above the budget of %(budget)s.") % {
        "spent": f"{spent:,.2f}", "currency": currency,
        "budget": f"{billing.money(budget, currency):,.2f}"}


def read_budget(value) -> Decimal | None:
    """A budget as a caller sends it (a decimal string or a number), or None where none is."""
    if value in (None, ""):
        return None
    try:
        return Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError({"budget": _("The budget must be a number, e.g. 20000.00; got "
                                           "%(value)s.") % {"value": repr(str(value)[:32])}}
                              ) from None


def set_policy(contract: Contract, *, kind: str, budget: Decimal | None, by, now: datetime
               ) -> OveragePolicy:
    """A new policy in force from `now`; ValidationError (by field) where it cannot be."""
    if kind not in OveragePolicy.Kind.values:
        raise ValidationError({"policy": _("Choose allow, budget or hold; got %(value)s.")
                               % {"value": repr(str(kind)[:32])}})
    if kind == OveragePolicy.Kind.BUDGET and budget is None:
        raise ValidationError({"budget": _("Give the budget: money a period, in %(currency)s.")
                               % {"currency": contract.terms_for(0).currency}})
    if kind != OveragePolicy.Kind.BUDGET:
        budget = None
    elif not budget.is_finite() or budget < 0 or budget >= Decimal("1e14"):
        raise ValidationError({"budget": _("The budget must be zero or more, under "
                                           "100,000,000,000,000.")})
    else:
        budget = billing.money(budget, contract.terms_for(0).currency)
    policy = OveragePolicy(contract=contract, kind=kind, budget=budget, set_by=by, set_at=now)
    policy.full_clean()
    policy.save()
    return policy
