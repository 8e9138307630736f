"""What sharing would have saved: a set of contracts with one calendar and one currency,
replayed over their last stated periods from the stated figures (each period's final billed
GPU-hours and the terms it was stated with) under the sharing rule (loans.maths.sharing).
Nothing is written."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.utils.translation import gettext as _

from loans.maths import sharing as maths
from loans.maths.billing import Terms
from loans.models import Contract, CorrectionLine, Statement

ZERO = Decimal(0)
MAX_PERIODS = 36


@dataclass(frozen=True)
class PeriodWhatIf:
    start: datetime
    end: datetime
    contracts: int
    alone: Decimal  # what the contracts paid, each on its own, at their final usage
    shared: Decimal  # what they would have paid the provider sharing
    shared_gpu_hours: Decimal

    @property
    def saving(self) -> Decimal:
        return self.alone - self.shared


@dataclass(frozen=True)
class WhatIf:
    contracts: list[Contract]
    currency: str
    periods: list[PeriodWhatIf]
    by_contract: dict[int, Decimal]  # each contract's saving over the periods

    @property
    def alone(self) -> Decimal:
        return sum((p.alone for p in self.periods), ZERO)

    @property
    def shared(self) -> Decimal:
        return sum((p.shared for p in self.periods), ZERO)

    @property
    def saving(self) -> Decimal:
        return self.alone - self.shared


def stated_of(contracts: list[Contract], since: datetime | None = None
              ) -> dict[int, list[Statement]]:
    """The contracts' period statements (from `since`, where given), in one query."""
    found: dict[int, list[Statement]] = defaultdict(list)
    rows = Statement.objects.filter(contract__in=contracts)
    if since is not None:
        rows = rows.filter(period_start__gte=since)
    for s in (rows
              .prefetch_related(Prefetch("corrected_by", queryset=CorrectionLine.objects.all()))
              .order_by("period_start")):
        if s.kind == Statement.Kind.PERIOD:
            found[s.contract_id].append(s)
    return found


def what_if(contracts: list[Contract], periods: int,
            stated: dict[int, list[Statement]] | None = None) -> WhatIf:
    """The last `periods` periods stated for at least two of the contracts, replayed as if
    they had shared; ValidationError (with the reason) where they cannot share. `stated`:
    their statements, where the caller has read them (stated_of)."""
    if len({c.pk for c in contracts}) < 2:
        raise ValidationError(_("Name at least two contracts."))
    if not 1 <= periods <= MAX_PERIODS:
        raise ValidationError(_("Replay 1 to %(most)s periods.") % {"most": MAX_PERIODS})
    currencies = {c.terms_for(0).currency for c in contracts}
    if len(currencies) > 1:
        raise ValidationError(_("The contracts are billed in %(currencies)s: a group shares one "
                                "currency.") % {"currencies": ", ".join(sorted(currencies))})
    if stated is None:
        stated = stated_of(contracts)
    by_start: dict[datetime, list[tuple[Contract, Statement]]] = defaultdict(list)
    for contract in contracts:
        for s in stated.get(contract.pk, []):
            by_start[s.period_start].append((contract, s))
    for start, rows in by_start.items():
        ends = {s.period_end for _c, s in rows}
        if len(ends) > 1:
            raise ValidationError(_("The contracts' periods do not begin and end together "
                                    "(from %(start)s): a group shares one calendar.")
                                  % {"start": start.date().isoformat()})
    currency = currencies.pop()
    shared_starts = sorted(s for s, rows in by_start.items() if len(rows) >= 2)[-periods:]
    out, savings = [], {c.pk: ZERO for c in contracts}
    for start in shared_starts:
        rows = by_start[start]
        members = [maths.Member(c.pk, _terms(s), _billed(s)) for c, s in rows]
        shared = maths.share(members, currency)
        alone = {m.contract_id: m.terms.cost(m.used).total for m in members}
        provider = maths.provider_total(members, shared, currency)
        for m in members:
            x = shared[m.contract_id]
            own = m.terms.cost(m.used).committed_cost + x.overage_cost + x.shared_cost
            savings[m.contract_id] += alone[m.contract_id] - own
        out.append(PeriodWhatIf(start, rows[0][1].period_end, len(rows),
                                sum(alone.values(), ZERO), provider,
                                sum((x.borrowed_gpu_hours for x in shared.values()), ZERO)))
    return WhatIf(contracts, currency, out, savings)


def _terms(s: Statement) -> Terms:
    return Terms(base_quota_gpus=0, max_quota_gpus=0, committed_gpu_hours=s.committed_gpu_hours,
                 committed_rate=s.committed_rate, overage_rate=s.overage_rate, term_months=1,
                 currency=s.currency)


def _billed(s: Statement) -> Decimal:
    """The period's final billed GPU-hours: its statement's and every correction's since."""
    return s.allocated_gpu_hours + sum((c.gpu_hours for c in s.corrected_by.all()), ZERO)


def candidates(contracts: list[Contract]) -> list[list[Contract]]:
    """The running contracts that could share, in sets of one calendar (time zone and start
    day) and one currency, of two or more."""
    sets: dict[tuple, list[Contract]] = defaultdict(list)
    for c in contracts:
        sets[(c.time_zone, c.starts_on.day, c.terms_for(0).currency)].append(c)
    return [sorted(v, key=lambda c: c.pk) for _k, v in sorted(sets.items()) if len(v) >= 2]
