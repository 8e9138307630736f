"""Period close: once a period has ended and the late-data grace has passed, its statement is
written, once. Usage that arrives later for a closed period is never lost and never rewrites
that statement: it is billed as an adjustment on the next period to close."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction

from loans import billing
from loans.models import Contract, Statement
from metering import fleet, usage

COMPLETENESS = Decimal("0.0001")


def _used(contract: Contract, start: datetime, end: datetime) -> Decimal:
    return billing.gpu_hours(usage.tenant_totals(contract.tenant_id, start, end)
                             .allocated_gpu_hours)


def pending_adjustment(contract: Contract, statements: list[Statement]) -> Decimal:
    """Usage metered for the closed periods since their statements, not yet billed: what the
    meter now says about each closed period, less what its statement billed, less the
    adjustments later statements already carried."""
    late = Decimal(0)
    for statement in statements:
        late += _used(contract, statement.period_start, statement.period_end)
        late -= statement.allocated_gpu_hours + statement.adjustment_gpu_hours
    # A recount can only lower the meter below a statement if samples were purged and
    # recounted; billing never gives GPU-hours back.
    return max(Decimal(0), late)


def due(period: billing.Period, now: datetime) -> bool:
    return now >= period.end + timedelta(hours=settings.LATE_DATA_GRACE_HOURS)


def close_period(contract: Contract, period: billing.Period) -> Statement | None:
    """Write the period's statement; None if it already has one (safe to run concurrently)."""
    try:
        with transaction.atomic():
            # Closers of one contract queue here, so each computes its adjustment from the
            # statements the previous one wrote.
            Contract.objects.select_for_update().filter(pk=contract.pk).first()
            earlier = list(Statement.objects.filter(contract=contract)
                           .order_by("period_index"))
            if any(s.period_index == period.index for s in earlier):
                return None
            return Statement.objects.create(**statement_figures(contract, period, earlier))
    except IntegrityError:  # another closer won the race, on a database without row locks
        return None


def statement_figures(contract: Contract, period: billing.Period,
                      earlier: list[Statement]) -> dict:
    terms = contract.terms()
    totals = usage.tenant_totals(contract.tenant_id, period.start, period.end)
    allocated = billing.gpu_hours(totals.allocated_gpu_hours)
    adjustment = pending_adjustment(contract, [s for s in earlier
                                               if s.period_index < period.index])
    cost = billing.period_cost(
        committed=terms.committed_gpu_hours, used=allocated + adjustment,
        committed_rate=terms.committed_rate, overage_rate=terms.overage_rate,
    )
    completeness = Decimal(repr(fleet.tenant_completeness(
        contract.tenant_id, period.start, period.end))).quantize(COMPLETENESS)
    return {
        "contract": contract, "period_index": period.index, "period_start": period.start,
        "period_end": period.end, "committed_gpu_hours": cost.committed_gpu_hours,
        "allocated_gpu_hours": allocated,
        "busy_gpu_hours": billing.gpu_hours(totals.busy_gpu_hours),
        "adjustment_gpu_hours": adjustment, "overage_gpu_hours": cost.overage_gpu_hours,
        "unused_gpu_hours": cost.unused_gpu_hours, "committed_rate": terms.committed_rate,
        "overage_rate": terms.overage_rate, "committed_cost": cost.committed_cost,
        "overage_cost": cost.overage_cost, "total_cost": cost.total, "currency": terms.currency,
        "completeness": min(Decimal(1), completeness),
    }


@dataclass(frozen=True)
class CloseRun:
    written: list[Statement]
    contracts: int


def close_due_periods(now: datetime) -> CloseRun:
    """Write every statement that is due, oldest period first, for every contract that ran."""
    written = []
    contracts = Contract.objects.filter(
        status__in=[Contract.Status.ACTIVE, Contract.Status.ENDED]).select_related("plan")
    closed = {(c, i) for c, i in Statement.objects.values_list("contract_id", "period_index")}
    count = 0
    for contract in contracts:
        count += 1
        for period in contract.periods():
            if not due(period, now):
                break
            if (contract.pk, period.index) in closed:
                continue
            statement = close_period(contract, period)
            if statement is not None:
                written.append(statement)
    return CloseRun(written, count)
