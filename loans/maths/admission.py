"""A contract's terms and overage policy as GPU-minute budgets for a scheduler. Pure.

Slurm counts GPU-minutes (`GrpTRESMins=gres/gpu=<minutes>`) and, with `safe` enforcement,
starts no job whose time limit x GPUs could pass what is left; so a period's use in a QOS never
passes its budget. The commitment's QOS holds the period's whole commitment; the overage QOS
holds what the policy allows past it:

- allow: no limit (today's behaviour: every hour above the commitment is billed at the overage
  rate);
- budget: the most whole GPU-minutes whose overage cost stays within the budget (money a
  period) at the contract's overage rate; no limit where that rate is zero;
- hold: none.

Both budgets are whole GPU-minutes rounded down, so the money billed for a period never passes
the committed cost plus the budget.
"""

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from fractions import Fraction

ALLOW, BUDGET, HOLD = "allow", "budget", "hold"
# The QOS gpuloans gives each Slurm account (loans.schedulers.slurm.budgets): a job in the
# overage one is past its commitment, not short of its floor (loans.services.guarantee).
COMMIT_QOS, OVERAGE_QOS = "gpuloans-commit-", "gpuloans-overage-"


@dataclass(frozen=True)
class Budgets:
    commitment_minutes: int
    overage_minutes: int | None  # None: no limit

    def overage_gpu_hours(self) -> Decimal | None:
        return None if self.overage_minutes is None else Decimal(self.overage_minutes) / 60


def budgets(*, committed_gpu_hours: Decimal, overage_rate: Decimal, policy: str,
            budget: Decimal | None) -> Budgets:
    """The GPU-minute budgets of one period under `policy`."""
    commitment = _minutes(committed_gpu_hours)
    if policy == HOLD:
        return Budgets(commitment, 0)
    if policy == BUDGET:
        if budget is None or budget < 0:
            raise ValueError("the budget policy needs a budget of zero or more")
        if overage_rate <= 0:
            return Budgets(commitment, None)
        # Exactly, as a fraction: budget / rate in 28 digits, times 60, fell a hair below a
        # whole minute that fits (7.2704 / 0.0006 x 60 is 727,040, not 727,039.99...).
        return Budgets(commitment, max(0, math.floor(Fraction(budget) * 60
                                                     / Fraction(overage_rate))))
    if policy == ALLOW:
        return Budgets(commitment, None)
    raise ValueError(f"unknown overage policy {policy!r}")


def _minutes(gpu_hours: Decimal) -> int:
    """Whole GPU-minutes in `gpu_hours`, rounded down (never more than was allowed)."""
    if gpu_hours <= 0:
        return 0
    return int((gpu_hours * 60).to_integral_value(rounding=ROUND_FLOOR))


def hours_allowed(limits: Budgets) -> float:
    """GPU-hours a period may use in all, or infinity."""
    if limits.overage_minutes is None:
        return math.inf
    return (limits.commitment_minutes + limits.overage_minutes) / 60


OPEN, OVERAGE, HELD = "open", "overage", "held"


def state(*, used_gpu_hours: Decimal, committed_gpu_hours: Decimal, overage_cost: Decimal,
          policy: str, budget: Decimal | None) -> str:
    """Where a period stands, as the ledger meters it: `open` (commitment left), `overage`
    (past it, the policy letting jobs run) or `held` (past it on hold, or past the budget)."""
    if used_gpu_hours < committed_gpu_hours:
        return OPEN
    if policy == HOLD or (policy == BUDGET and budget is not None and overage_cost >= budget):
        return HELD
    return OVERAGE
