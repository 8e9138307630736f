"""The commitment advice of a contract that shares a group, priced on the group's pooled usage
(DESIGN "Sharing a commitment"): the group's pooled newsvendor quantile less what its partners
commit, and how much of the saving comes from pooling (against the commitment advised to the
team alone, both priced on the pooled usage)."""

from __future__ import annotations  # advice and this module read each other

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils.translation import gettext_noop

from core.wording import worded
from loans.maths import recommend
from loans.models import Contract, SharingMember
from loans.services import advice


@dataclass(frozen=True)
class Pooled:
    group: str
    partners: list[Contract]
    partners_commit: Decimal
    hourly: list[float]  # the group's GPU-hours by the hour, summed over its teams


def pooled_history(contract: Contract, now: datetime, cache: dict | None = None
                   ) -> Pooled | None:
    """The group the contract shares from its next period (where advice applies), with the
    teams' hourly usage summed, from the first hour any of them was metered."""
    ahead = next((p.start for p in contract.periods() if p.start > now), None)
    at = ahead or now
    row = next((r for r in SharingMember.objects.filter(contract=contract)
                .select_related("group") if r.covers(at)), None)
    if row is None:
        return None
    partners = [m.contract for m in row.group.members.select_related("contract__plan",
                                                                     "contract__tenant")
                if m.covers(at) and m.contract_id != contract.pk
                and m.contract.status == Contract.Status.ACTIVE]
    if not partners:
        return None
    series = [advice.series_of(c.tenant_id, now, cache) for c in [contract, *partners]]
    first = min((next((k for k, n in enumerate(s.counts) if n), len(s.counts))
                 for s in series), default=0)
    hourly = [sum(values) for values in zip(*(s.allocated for s in series), strict=True)]
    commit = sum((advice.terms_ahead(c, now).committed_gpu_hours for c in partners),
                 Decimal(0))
    return Pooled(row.group.name, partners, commit, hourly[first:])


def pooled_draft(contract: Contract, now: datetime, period_hours: int,
                 alone: advice.Draft | None, cache: dict | None = None
                 ) -> tuple[bool, advice.Draft | None]:
    """Whether the contract shares a group with partners from its next period, and its
    commitment draft priced on the group's pooled usage (None where the pooled optimum keeps
    its commitment, or the group has no period's worth of history)."""
    pooled = pooled_history(contract, now, cache)
    if pooled is None:
        return False, None
    return True, _draft(pooled, contract, now, period_hours, alone)


def _draft(pooled: Pooled, contract: Contract, now: datetime, period_hours: int,
           alone: advice.Draft | None) -> advice.Draft | None:
    terms = advice.terms_ahead(contract, now)
    found = recommend.longest_windows(pooled.hourly, period_hours)
    if found is None:
        return None
    lookback, values = found
    optimum = recommend.newsvendor(values, terms.committed_rate, terms.overage_rate)
    others = float(pooled.partners_commit)
    recommended = recommend.whole(max(0.0, optimum - others))
    current = terms.committed_gpu_hours
    standalone = Decimal(alone.recommended) if alone is not None else current
    candidates = [float(current) + others, float(recommended) + others,
                  float(standalone) + others]
    now_cost, pooled_cost, alone_cost = (
        Decimal(repr(p.expected)).quantize(Decimal("0.01")) for p in recommend.cost_curve(
            values, candidates, terms.committed_rate, terms.overage_rate))
    saving, from_pooling = now_cost - pooled_cost, alone_cost - pooled_cost
    if saving <= 0 or recommended == current or abs(recommended - current) < current / 100:
        return None
    facts = {"group": pooled.group, "recommended": f"{recommended:,.0f}",
             "current": f"{current:,.0f}", "partners": f"{pooled.partners_commit:,.0f}",
             "saving": f"{saving:,.2f}", "pooling": f"{from_pooling:,.2f}",
             "alone": f"{standalone:,.0f}", "currency": terms.currency}
    wording = worded(gettext_noop(
        "Sharing in %(group)s, commit %(recommended)s GPU-h a period instead of %(current)s: "
        "priced on the group's pooled usage, with its partners committing %(partners)s GPU-h, "
        "the group's expected cost falls by %(saving)s %(currency)s a period; %(pooling)s of "
        "that comes from pooling (advised alone, this team would commit %(alone)s GPU-h)."),
        facts)
    return advice.Draft(
        kind=advice.Kind.COMMITMENT, current=f"{current:.0f}", recommended=f"{recommended:.0f}",
        wording=wording, expected_saving=saving,
        confidence=recommend.confidence(values, lookback, period_hours),
        lookback_days=lookback,
        evidence={"pooled": {
            "group": pooled.group, "teams": 1 + len(pooled.partners),
            "partners_commit": float(pooled.partners_commit),
            "pooled_optimum": round(optimum, 3),
            "quantile": round(1 - float(terms.committed_rate / terms.overage_rate), 4),
            "windows": len(values), "standalone_recommended": float(standalone),
            "group_costs": {"current": str(now_cost), "recommended": str(pooled_cost),
                            "standalone": str(alone_cost)},
            "saving_from_pooling": str(from_pooling)},
            "recommended": float(recommended), "current": float(current)})
