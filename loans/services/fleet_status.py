"""The operators' fleet page: every active contract's period at a glance, and capacity against
what has been guaranteed."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count

from loans.maths.figures import PeriodGlance
from loans.maths.sharing import Shared
from loans.models import Alert, Contract, Plan
from loans.models.contracts import with_amendments
from loans.services import bursts
from loans.services.guarantee import fleet as guarantee_fleet
from loans.services.guarantee.fleet import FleetFloor
from loans.services.ledger import bills, dashboard, pooled
from metering.usage import floor_hour


@dataclass(frozen=True)
class ContractStatus:
    contract: Contract
    figures: PeriodGlance
    open_alerts: int = 0
    shared: Shared | None = None  # in a sharing group: its sharing at the projected usage
    floor: FleetFloor | None = None  # its period's floor so far

    @property
    def projected(self) -> bills.Bill:
        """The period's end as its statement would bill it (sharing and the credit its floor
        so far earns included)."""
        f = self.figures
        return bills.priced(f.terms, f.projected_used_gpu_hours, self.shared,
                            first=f.period.index == 0,
                            credit=self.floor.credit if self.floor else Decimal(0))

    @property
    def availability(self) -> Decimal:
        return self.floor.floor.availability if self.floor else Decimal(1)

    @property
    def used_share(self) -> Decimal | None:
        return self.figures.used_share

    @property
    def projected_share(self) -> Decimal | None:
        c = self.figures.committed_gpu_hours
        return self.figures.projected_used_gpu_hours / c if c > 0 else None

    @property
    def projected_overage_cost(self) -> Decimal:
        """Overage projected to be billed, after sharing."""
        return self.projected.overage_cost

    @property
    def projected_waste(self) -> Decimal:
        """Money paid for committed GPU-hours the forecast says will be neither used nor lent."""
        return self.projected.unused_money

    @property
    def money_at_stake(self) -> Decimal:
        """What the forecast says is lost either way, overage or waste, as one positive sum:
        the largest comes first whichever side it is on."""
        return max(self.projected_overage_cost, self.projected_waste)


SORTS = {
    "tenant": lambda s: s.contract.tenant.name.lower(),
    "plan": lambda s: s.contract.plan.name.lower(),
    "used": lambda s: s.used_share or Decimal(0),
    "projected": lambda s: s.projected_share or Decimal(0),
    "money": lambda s: s.money_at_stake,
    "days_left": lambda s: s.figures.days_left,
    "alerts": lambda s: s.open_alerts,
    "availability": lambda s: s.availability,
}


# Read by no fleet figure; a thousand contracts' two timestamps more cost about 9 ms to decode.
UNREAD = ("created_at", "notes", "tenant__created_at", "tenant__alert_emails",
          "tenant__webhook_url")


def active_contracts() -> list[Contract]:
    """The active contracts with what the fleet reads of them, in one read to share: each
    plan read once (a fleet shares a few), not copied into every contract's row."""
    contracts = list(Contract.objects.filter(status=Contract.Status.ACTIVE)
                     .select_related("tenant").defer(*UNREAD))
    plans = Plan.objects.in_bulk({contract.plan_id for contract in contracts})
    for contract in contracts:
        contract.plan = plans[contract.plan_id]
    return with_amendments(contracts)


def contract_statuses(now: datetime, sort: str = "projected", descending: bool = True,
                      contracts: list[Contract] | None = None):
    """Every active contract (or of `contracts`, active_contracts() read by the caller) in its
    current period, sorted by one of SORTS."""
    contracts = active_contracts() if contracts is None else contracts
    alerts = dict(Alert.objects.filter(state=Alert.State.OPEN, tenant__isnull=False)
                  .values("tenant_id").annotate(n=Count("pk")).values_list("tenant_id", "n"))
    pairs = [(c, c.period_at(now)) for c in contracts]
    pairs = [(c, period) for c, period in pairs if period is not None]
    figures = dashboard.glances_of(pairs, now)
    shared = {pk: x for pool in pooled.pools(now) for pk, x in pool.projected.items()}
    floors = guarantee_fleet.floors([c for c, _p in pairs], now)
    statuses = [ContractStatus(c, figures[c.pk], alerts.get(c.tenant_id, 0), shared.get(c.pk),
                               floors.get(c.pk))
                for c, _p in pairs]
    return sorted(statuses, key=SORTS[sort], reverse=descending)


@dataclass(frozen=True)
class Capacity:
    model: str
    physical_gpus: float  # reported within the capacity window; MIG instances as their shares
    guaranteed_gpus: int
    max_gpus: int

    @property
    def over_commitment(self) -> float | None:
        """Guaranteed base quotas per physical GPU: above 1 the guarantees cannot all be met at
        once."""
        return self.guaranteed_gpus / self.physical_gpus if self.physical_gpus else None


def capacity(now: datetime, contracts: list[Contract] | None = None,
             physical: dict[str, float] | None = None) -> tuple[list[Capacity], Capacity]:
    """GPUs by model (those that reported within the capacity window) against the base and
    max quotas of the contracts running now, and the whole fleet. Plans for any model count
    in the whole fleet only. `contracts` and `physical` are what active_contracts() and
    bursts.physical_gpus(now) return, where the caller has them."""
    guaranteed: dict[str, int] = defaultdict(int)
    caps: dict[str, int] = defaultdict(int)
    for contract in active_contracts() if contracts is None else contracts:
        period = contract.period_at(now)
        if period is None:
            continue
        terms = contract.terms_for(period.index)
        guaranteed[contract.gpu_model] += terms.base_quota_gpus
        caps[contract.gpu_model] += terms.max_quota_gpus
    physical = bursts.physical_gpus(now) if physical is None else physical
    models = sorted((set(physical) | set(guaranteed)) - {""})
    rows = [Capacity(m, physical.get(m, 0.0), guaranteed.get(m, 0), caps.get(m, 0))
            for m in models]
    whole = Capacity("", sum(physical.values()), sum(guaranteed.values()), sum(caps.values()))
    return rows, whole


@dataclass(frozen=True)
class Overview:
    """The fleet page: contracts, capacity, and each pool's coming hours."""

    statuses: list[ContractStatus]
    capacity: list[Capacity]
    whole: Capacity
    pools: list[tuple[str, dict]]  # GPU model, bursts.pool_series


def overview(now: datetime, sort: str, descending: bool, pool_ahead: timedelta) -> Overview:
    """Everything the fleet page shows of contracts and pools, from one read of the active
    contracts and one of the GPUs."""
    contracts = active_contracts()
    pools = bursts.Pools(bursts.physical_gpus(now), bursts.guarantees(contracts))
    by_model, whole = capacity(now, contracts, pools.physical)
    start = floor_hour(now)
    models = sorted(({c.gpu_model for c in contracts} | set(pools.physical)) - {bursts.ANY})
    return Overview(
        statuses=contract_statuses(now, sort, descending, contracts),
        capacity=by_model, whole=whole,
        pools=[(model, bursts.pool_series(model, start, start + pool_ahead, pools))
               for model in models])
