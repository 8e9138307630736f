"""The floor across the fleet (the operators' page): every running contract's availability so
far in its current period, the credit that period would cost at it, and, for a contract that
was short, its pool at the moment its longest wait began: the base quotas guaranteed on that
GPU model then, against the physical GPUs that had reported within the capacity window (more
guaranteed than there are GPUs is over-commitment, the likely cause)."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from loans.maths import billing
from loans.models import Contract
from loans.services import bursts
from loans.services.guarantee import measure
from metering.usage import waits as usage_waits


@dataclass(frozen=True)
class PoolAt:
    model: str  # "" for a plan of any model: the whole fleet
    at: datetime
    guaranteed_gpus: int
    physical_gpus: float

    @property
    def over_committed(self) -> bool:
        return self.guaranteed_gpus > self.physical_gpus


@dataclass(frozen=True)
class FleetFloor:
    floor: measure.Floor
    credit: Decimal  # the service credit the period would earn at its availability so far
    pool: PoolAt | None  # where it was short: its pool when its longest wait began
    currency: str  # the period's terms'



def floors(contracts: list[Contract], now: datetime) -> dict[int, FleetFloor]:
    """The floor of each contract's period at `now` (those with one), read at once."""
    pairs = [(c, c.period_at(now)) for c in contracts]
    pairs = [(c, p) for c, p in pairs if p is not None]
    terms = {c.pk: c.terms_for(p.index) for c, p in pairs}
    read = measure.read_many([(c, [(p, terms[c.pk])]) for c, p in pairs], now)
    guaranteed = bursts.guarantees(contracts)
    # Each short contract's pool when its longest wait began, the GPUs read in one query.
    moments = {c.pk: (c.gpu_model, read[c.pk][p.index].worst[0].start) for c, p in pairs
               if p.index in read[c.pk] and read[c.pk][p.index].worst}
    physical = dict(zip(moments, usage_waits.physical_at(list(moments.values()),
                                                         bursts.window()), strict=True))
    out = {}
    for contract, period in pairs:
        floor = read[contract.pk].get(period.index)
        if floor is None:
            continue
        in_force = terms[contract.pk]
        credit = billing.service_credit(in_force.cost(billing.ZERO).committed_cost,
                                        floor.credit_pct, in_force.currency)
        pool = None
        if contract.pk in moments:
            model, at = moments[contract.pk]
            owed = guaranteed.get(model, []) if model else [
                g for rows in guaranteed.values() for g in rows]
            pool = PoolAt(model, at, sum(base for a, b, base in owed if a <= at < b),
                          physical[contract.pk])
        out[contract.pk] = FleetFloor(floor, credit, pool, in_force.currency)
    return out
