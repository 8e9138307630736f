"""A contract period's figures from the meter: used, busy, cost. Reads usage through metering."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from loans import billing
from loans.models import Contract
from metering import usage


@dataclass(frozen=True)
class PeriodSummary:
    period: billing.Period
    committed_gpu_hours: Decimal
    used_gpu_hours: Decimal
    busy_gpu_hours: Decimal
    cost: billing.PeriodCost
    currency: str

    @property
    def utilisation(self) -> Decimal | None:
        return billing.utilisation(self.committed_gpu_hours, self.used_gpu_hours)


def period_summary(contract: Contract, period: billing.Period) -> PeriodSummary:
    terms = contract.terms()
    totals = usage.tenant_totals(contract.tenant_id, period.start, period.end)
    used = billing.gpu_hours(totals.allocated_gpu_hours)
    return PeriodSummary(
        period=period,
        committed_gpu_hours=terms.committed_gpu_hours,
        used_gpu_hours=used,
        busy_gpu_hours=billing.gpu_hours(totals.busy_gpu_hours),
        cost=billing.period_cost(
            committed=terms.committed_gpu_hours,
            used=used,
            committed_rate=terms.committed_rate,
            overage_rate=terms.overage_rate,
        ),
        currency=terms.currency,
    )


def current_summary(contract: Contract, now: datetime) -> PeriodSummary | None:
    period = contract.period_at(now)
    return period_summary(contract, period) if period else None
