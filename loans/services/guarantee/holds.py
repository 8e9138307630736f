"""gpuloans' own timed record of when it held a contract (ContractHold): the floor counts
nothing in those intervals (a team's jobs held by its own overage policy were not short of its
guarantee). A job run every minute (loans.tasks.note_holds) reads where each running
contract's period stands, as the schedulers' enforcement reads it (a period on hold past its
commitment, or past its overage budget: loans.maths.admission.HELD), opens a hold where one
begins and closes it where it ends. A hold is known to the minute it was noticed; Slurm's own
GPU-minute budgets, which hold the jobs to the second, give their jobs a pending reason of
their own (QOSGrpGRESMinutes), which the floor never counts anyway.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from core import audit
from loans.maths import admission
from loans.models import Contract, ContractHold, policies_of
from loans.services.ledger import read as ledgers


@dataclass(frozen=True)
class Noted:
    opened: int
    closed: int


def _reason(kind: str) -> str:
    return ContractHold.Reason.HOLD if kind == admission.HOLD else ContractHold.Reason.BUDGET


def note(now: datetime) -> Noted:
    """Open and close the holds of every contract as its period stands at `now`."""
    running = [c for c in Contract.objects.filter(status=Contract.Status.ACTIVE)
               .select_related("plan").prefetch_related("amendments")
               if c.period_at(now) is not None]
    entries = ledgers.period_entries([(c, c.period_at(now)) for c in running], now)
    policies = policies_of([c.pk for c in running])
    held = {}
    for contract in running:
        entry = entries[contract.pk]
        kind, budget = policies[contract.pk]
        state = admission.state(used_gpu_hours=entry.metered,
                                committed_gpu_hours=entry.terms.committed_gpu_hours,
                                overage_cost=entry.terms.cost(entry.metered).overage_cost,
                                policy=kind, budget=budget)
        if state == admission.HELD:
            held[contract.pk] = _reason(kind)
    periods = {c.pk: c.period_at(now) for c in running}
    opened = closed = 0
    with transaction.atomic():
        for hold in ContractHold.objects.select_for_update().filter(until__isnull=True):
            period = periods.get(hold.contract_id)
            if hold.contract_id in held and period is not None and hold.since >= period.start:
                held.pop(hold.contract_id)  # still held, in the period it began in
                continue
            # Released, or its period ended (the next starts with its commitment unspent).
            end = period.start if period is not None and hold.since < period.start else now
            if end > hold.since:
                ContractHold.objects.filter(pk=hold.pk).update(until=end)
                audit.changed(hold, {"until": None}, {"until": end})
            else:
                ContractHold.objects.filter(pk=hold.pk).delete()  # nothing was held yet
            closed += 1
        for contract_id, reason in held.items():
            ContractHold.objects.create(contract_id=contract_id, reason=reason, since=now)
            opened += 1
    return Noted(opened, closed)
