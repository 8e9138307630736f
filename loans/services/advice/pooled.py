"""The commitment advice of a contract that shares a group (DESIGN "Sharing a commitment"): the
commitments that minimise the group's expected cost under its sharing rule, priced over the
history's period-long windows with the function the close uses (loans.maths.pooling), the
members advised together. The group's advice is worked out once and kept in the job's cache
for its other members."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils.translation import gettext_noop

from core.wording import worded
from loans.maths import pooling, recommend
from loans.models import Contract, SharingMember
from loans.services.advice import drafts


@dataclass(frozen=True)
class GroupAdvice:
    group: str
    lookback: int
    seats: list[pooling.Seat]
    today: dict[int, float]  # every member's commitment as it stands
    advised: dict[int, float]  # as advised together
    currency: str

    def cost(self, commitments: dict[int, float]) -> Decimal:
        return _money(pooling.expected(self.seats, commitments))

    def own_cost(self, commitments: dict[int, float], key: int) -> Decimal:
        return _money(pooling.own_costs(self.seats, commitments, key))


def _money(value: float) -> Decimal:
    return Decimal(repr(value)).quantize(Decimal("0.01"))


def group_row(contract: Contract, now: datetime) -> SharingMember | None:
    """The membership the contract shares from its next period (where advice applies)."""
    ahead = next((p.start for p in contract.periods() if p.start > now), None)
    at = ahead or now
    return next((r for r in SharingMember.objects.filter(contract=contract)
                 .select_related("group", "contract") if r.covers(at)), None)


def group_advice(contract: Contract, now: datetime, period_hours: int,
                 cache: dict | None = None) -> GroupAdvice | None:
    """The advice of the group the contract shares from its next period, with its active
    partners; None outside a group, alone in it, or without a period's worth of history."""
    row = group_row(contract, now)
    if row is None:
        return None
    key = ("pooled", row.group_id)
    if cache is not None and key in cache:
        return cache[key]
    at = next((p.start for p in contract.periods() if p.start > now), now)
    members = sorted([m.contract for m in row.group.members.select_related(
        "contract__plan", "contract__tenant").prefetch_related("contract__amendments")
        if m.covers(at) and m.contract.status == Contract.Status.ACTIVE], key=lambda c: c.pk)
    found = _advise(row.group.name, members, now, period_hours, cache) if len(members) > 1 \
        else None
    if cache is not None:
        cache[key] = found
    return found


def _advise(name: str, members: list[Contract], now: datetime, period_hours: int,
            cache: dict | None) -> GroupAdvice | None:
    series = [drafts.series_of(c.tenant_id, now, cache) for c in members]
    first = min((next((k for k, n in enumerate(s.counts) if n), len(s.counts))
                 for s in series), default=0)
    pooled = [sum(values) for values in zip(*(s.allocated for s in series), strict=True)]
    found = recommend.longest_windows(pooled[first:], period_hours)
    if found is None:
        return None
    lookback = found[0]
    seats = []
    for contract, hours in zip(members, series, strict=True):
        terms = drafts.terms_ahead(contract, now)
        seats.append(pooling.Seat(
            key=contract.pk, committed=float(terms.committed_gpu_hours),
            committed_rate=float(terms.committed_rate), overage_rate=float(terms.overage_rate),
            windows=tuple(recommend.period_windows(hours.allocated[first:], period_hours,
                                                   lookback)),
            may_change=any(p.start > now for p in contract.periods())))
    today = {s.key: s.committed for s in seats}
    return GroupAdvice(name, lookback, seats, today, pooling.advise(seats),
                       drafts.terms_ahead(members[0], now).currency)


def pooled_draft(contract: Contract, now: datetime, period_hours: int,
                 alone: drafts.Draft | None, cache: dict | None = None
                 ) -> tuple[bool, drafts.Draft | None]:
    """Whether the contract shares a group with partners from its next period, and its
    commitment draft as the group's advice has it (None where the group is best served by
    its commitment as it is, or has no period's worth of history)."""
    found = group_advice(contract, now, period_hours, cache)
    if found is None:
        return group_row(contract, now) is not None and _has_partners(contract, now), None
    return True, _draft(found, contract, alone, period_hours)


def _has_partners(contract: Contract, now: datetime) -> bool:
    row = group_row(contract, now)
    return row is not None and row.group.members.exclude(contract=contract).filter(
        voided_at__isnull=True, contract__status=Contract.Status.ACTIVE).exists()


def _draft(found: GroupAdvice, contract: Contract, alone: drafts.Draft | None,
           period_hours: int) -> drafts.Draft | None:
    me = next(s for s in found.seats if s.key == contract.pk)
    current = Decimal(repr(me.committed)).normalize()
    recommended = Decimal(repr(found.advised[me.key])).quantize(Decimal(1))
    standalone = Decimal(alone.recommended) if alone is not None else current
    alone_values = {**found.today, me.key: float(standalone)}
    now_cost, advised_cost = found.cost(found.today), found.cost(found.advised)
    alone_cost = found.cost(alone_values)
    saving = now_cost - advised_cost
    if saving <= 0 or recommended == current or abs(recommended - current) < current / 100:
        return None
    own_now = found.own_cost(found.today, me.key)
    own_advised = found.own_cost(found.advised, me.key)
    facts = {"group": found.group, "recommended": f"{recommended:,.0f}",
             "current": f"{current:,.0f}", "saving": f"{saving:,.2f}",
             "own_now": f"{own_now:,.2f}", "own_advised": f"{own_advised:,.2f}",
             "alone": f"{standalone:,.0f}", "alone_cost": f"{alone_cost:,.2f}",
             "currency": found.currency, "teams": len(found.seats)}
    wording = worded(gettext_noop(
        "Sharing in %(group)s, commit %(recommended)s GPU-h a period instead of %(current)s: "
        "with the %(teams)s teams committing as advised together, the group's expected cost "
        "falls by %(saving)s %(currency)s a period, and this team's own expected cost is "
        "%(own_advised)s instead of %(own_now)s. Advised alone, this team would commit "
        "%(alone)s GPU-h, and the group would expect to pay %(alone_cost)s a period."), facts)
    values = [sum(column) for column in zip(*(s.windows for s in found.seats), strict=True)]
    return drafts.Draft(
        kind=drafts.Kind.COMMITMENT, current=f"{current:.0f}", recommended=f"{recommended:.0f}",
        wording=wording, expected_saving=saving,
        confidence=recommend.confidence(values, found.lookback, period_hours),
        lookback_days=found.lookback,
        evidence={"pooled": {
            "group": found.group, "teams": len(found.seats),
            "partners_commit": sum(v for k, v in found.today.items() if k != me.key),
            "partners_advised": sum(v for k, v in found.advised.items() if k != me.key),
            "windows": len(me.windows), "standalone_recommended": float(standalone),
            "group_costs": {"current": str(now_cost), "recommended": str(advised_cost),
                            "standalone": str(alone_cost)},
            "own_costs": {"current": str(own_now), "recommended": str(own_advised)}},
            "recommended": float(recommended), "current": float(current)})

