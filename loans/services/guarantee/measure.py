"""A contract's floor period by period: the waits of its tenant's jobs that asked for its GPUs
and waited for room (metering.usage.waits), less the intervals gpuloans held the contract
itself (ContractHold) and the jobs in its overage QOS, against the base quota less what the
tenant held then (the raw samples); the availability, the short GPU-hours, the guarantee in
force and the credit its tiers give (loans.maths.guarantee).

A period whose raw samples have been purged cannot be measured again: its statement's
figures stand (`read` leaves it out), as rollups stand over purged days.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings

from loans.maths import admission, billing, guarantee
from loans.models import Contract, ContractHold
from metering.usage import waits as usage_waits

AVAILABILITY = Decimal("0.00000001")


@dataclass(frozen=True)
class Evidence:
    """One wait a lead reads: the job, its GPUs, from and to, and what the team held then."""

    cluster: str
    job: str
    gpus: int
    start: datetime
    end: datetime
    held: float  # GPUs the tenant held when it began to wait
    still_waiting: bool

    @property
    def gpu_hours(self) -> float:
        return self.gpus * (self.end - self.start).total_seconds() / 3600


@dataclass(frozen=True)
class Floor:
    """One period's floor, measured over its start to `until` (its end, or now)."""

    measure: guarantee.Measure
    guarantee_pct: Decimal
    credit_pct: Decimal
    until: datetime
    worst: list[Evidence]
    waits: int  # waits on the floor in the period

    @property
    def availability(self) -> Decimal:
        """As a statement keeps it: a share to eight places."""
        return Decimal(repr(self.measure.availability)).quantize(AVAILABILITY)

    @property
    def availability_pct(self) -> Decimal:
        return self.availability * 100

    @property
    def short_gpu_hours(self) -> Decimal:
        return billing.gpu_hours(self.measure.short_gpu_hours)

    @property
    def below_guarantee(self) -> bool:
        return self.availability_pct < self.guarantee_pct

    def points_above(self) -> Decimal:
        """Percentage points between the availability and the guarantee (negative: below)."""
        return self.availability_pct - self.guarantee_pct


def credit_pct(availability: float, terms: billing.Terms) -> Decimal:
    return guarantee.credit_pct(availability, guarantee.parse_tiers(terms.credit_tiers))


def read(contract: Contract, periods: list[tuple[billing.Period, billing.Terms]], now: datetime
         ) -> dict[int, Floor]:
    """The floor of each of `periods` (started ones, with the terms in force in each) as of
    `now`, in a constant number of queries (one where the tenant has no waits); periods whose
    raw samples have been purged are left out where there are waits to measure."""
    return read_many([(contract, periods)], now)[contract.pk]


def read_many(asked: list[tuple[Contract, list[tuple[billing.Period, billing.Terms]]]],
              now: datetime) -> dict[int, dict[int, Floor]]:
    """read() for many contracts (the fleet's, each in its current period), in one query of
    the waits, one of the holds and one of the raw samples for each tenant that had waits."""
    asked = [(c, [(p, terms) for p, terms in periods if p.start < now]) for c, periods in asked]
    spans = [(c, periods[0][0].start, min(periods[-1][0].end, now))
             for c, periods in asked if periods]
    if not spans:
        return {c.pk: {} for c, _periods in asked}
    found = usage_waits.waits_in(sorted({c.tenant_id for c, _a, _b in spans}),
                                 min(a for _c, a, _b in spans), max(b for _c, _a, b in spans))
    waiting = {c.pk for c, _a, _b in spans if found.get(c.tenant_id)}
    kept_from = usage_waits.raw_kept_from() if waiting else None
    models = usage_waits.cluster_models() if any(
        c.gpu_model for c, _a, _b in spans if c.pk in waiting) else {}
    holds: dict[int, list] = {pk: [] for pk in waiting}
    for h in ContractHold.objects.filter(contract_id__in=waiting) if waiting else ():
        holds[h.contract_id].append((h.since, h.until or now))
    kept = []
    for contract, periods in asked:
        if kept_from is not None and contract.pk in waiting:
            periods = [(p, terms) for p, terms in periods if p.start >= kept_from]
        waits = _waits(contract, periods, now, found.get(contract.tenant_id, []), models)
        kept.append((contract, periods, waits))
    # What each tenant held while its jobs waited, for every contract at once.
    held = usage_waits.held_during_many({
        c.tenant_id: ([(x.start, x.end) for _w, x in waits], c.gpu_model)
        for c, _p, waits in kept if waits})
    return {c.pk: _floors(periods, now, waits, holds.get(c.pk, []), held.get(c.tenant_id, []))
            for c, periods, waits in kept}


def _waits(contract: Contract, periods: list[tuple[billing.Period, billing.Terms]],
           now: datetime, found: list, models: dict) -> list:
    """The tenant's waits on this contract's floor over `periods`: (the wait as read, its
    interval on the floor)."""
    if not periods:
        return []
    start, end = periods[0][0].start, min(periods[-1][0].end, now)
    types = settings.GPU_TYPE_MODELS
    waits = []
    for w in found:
        if w.submitted >= end or not guarantee.counts_for(
                gpu_type=w.gpu_type, plan_model=contract.gpu_model, type_models=types,
                cluster_models=models.get(w.cluster_id, set())):
            continue
        wait = guarantee.wait_of(
            guarantee.Request(w.name, w.gpus, w.submitted, w.eligible, w.started, w.ended,
                              w.capacity, w.qos), now=now, overage_qos=admission.OVERAGE_QOS)
        if wait is not None and wait.end > start:
            waits.append((w, wait))
    return waits


def _floors(periods: list[tuple[billing.Period, billing.Terms]], now: datetime, waits: list,
            holds: list, held: list) -> dict[int, Floor]:
    out = {}
    for period, terms in periods:
        until = min(period.end, now)
        mine = [(w, x) for w, x in waits if x.start < until and x.end > period.start
                and not _within(max(x.start, period.start), min(x.end, until), holds)]
        result = guarantee.measure(start=period.start, end=until,
                                   base_quota=terms.base_quota_gpus,
                                   waits=[x for _w, x in mine], held=held, holds=holds)
        worst = [Evidence(w.cluster, x.job, x.gpus, max(x.start, period.start),
                          min(x.end, until), guarantee.held_at(max(x.start, period.start),
                                                               held),
                          w.started is None and w.ended is None)
                 for w, x in _worst(mine)]
        out[period.index] = Floor(result, terms.guarantee_pct,
                                  credit_pct(result.availability, terms), until, worst,
                                  len(mine))
    return out


def _within(start: datetime, end: datetime, holds: list[tuple[datetime, datetime]]) -> bool:
    """Whether [start, end) lies wholly inside gpuloans' own holds: no wait on the floor."""
    for a, b in sorted(holds):
        if a > start:
            return False
        start = max(start, b)
        if start >= end:
            return True
    return start >= end


def _worst(pairs: list, count: int = 5) -> list:
    by_wait = {id(x): (w, x) for w, x in pairs}
    return [by_wait[id(x)] for x in guarantee.worst([x for _w, x in pairs], count)]
