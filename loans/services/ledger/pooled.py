"""A sharing group's pooled burn-down now: its members' current periods added up (committed,
used, projected at period end), and the sharing rule run on the projected usage, so a lead
sees the group's remaining commitment beside the team's own and whether the group is
projected to cover the team's overage; the fleet page shows every group's. Admission still
reads each contract's own commitment (DESIGN): lending is settled at close."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from loans.maths import sharing as maths
from loans.maths.billing import gpu_hours
from loans.maths.figures import PeriodGlance
from loans.models import Contract, SharingGroup, SharingMember
from loans.services.ledger import dashboard, sharing

ZERO = Decimal(0)


@dataclass(frozen=True)
class Pool:
    group: SharingGroup
    members: list[tuple[Contract, PeriodGlance]]
    projected: dict[int, maths.Shared]  # the sharing at the projected usage, by contract id

    @property
    def currency(self) -> str:
        return self.group.currency

    @property
    def committed_gpu_hours(self) -> Decimal:
        return sum((g.committed_gpu_hours for _c, g in self.members), ZERO)

    @property
    def used_gpu_hours(self) -> Decimal:
        return sum((g.used_gpu_hours for _c, g in self.members), ZERO)

    @property
    def remaining_gpu_hours(self) -> Decimal:
        """The group's committed GPU-hours not used yet (negative past the pooled commitment)."""
        return self.committed_gpu_hours - self.used_gpu_hours

    @property
    def projected_gpu_hours(self) -> Decimal:
        return sum((g.projected_used_gpu_hours for _c, g in self.members), ZERO)

    @property
    def projected_overage_gpu_hours(self) -> Decimal:
        """Overage the group is projected to be left with after sharing."""
        return sum((s.overage_gpu_hours for s in self.projected.values()), ZERO)

    @property
    def projected_saving(self) -> Decimal:
        return sum((s.saving for s in self.projected.values()), ZERO)

    def glance_of(self, contract_id: int) -> PeriodGlance:
        """A member's own figures of its current period."""
        return next(g for c, g in self.members if c.pk == contract_id)

    def covered(self, contract_id: int) -> tuple[Decimal, Decimal]:
        """(the team's projected overage alone, the part the group is projected to cover)."""
        alone = self.glance_of(contract_id).projected_cost.overage_gpu_hours
        return alone, self.projected[contract_id].borrowed_gpu_hours


def pools(now: datetime, groups: sharing.Groups | None = None) -> list[Pool]:
    """The pooled burn-down of every group with a period running now (of `groups`, where
    given: those a ledger read), every member's figures read in one query."""
    if groups is None:
        groups = sharing.Groups(list(SharingMember.objects.filter(voided_at__isnull=True)
                                     .select_related("contract__plan", "contract__tenant",
                                                     "group")))
    if not groups.rows:
        return []
    by_group: dict[int, list[tuple[Contract, object]]] = {}
    for row in groups.rows:
        period = row.contract.period_at(now)
        if period is not None and row.covers(period.start) and row.contract.status == "active":
            by_group.setdefault(row.group_id, []).append((row.contract, period))
    pairs = [pair for members in by_group.values() for pair in members]
    glances = dashboard.glances_of(pairs, now)
    names = {r.group_id: r.group for r in groups.rows}
    out = []
    for group_id, members in sorted(by_group.items(), key=lambda kv: names[kv[0]].name):
        seen = [(c, glances[c.pk]) for c, _p in sorted(members, key=lambda m: m[0].pk)]
        rows = [maths.Member(c.pk, g.terms, gpu_hours(g.projected_used_gpu_hours))
                for c, g in seen]
        out.append(Pool(names[group_id], seen, maths.share(rows, names[group_id].currency)))
    return out


def pool_of(contract: Contract, now: datetime, groups: sharing.Groups) -> Pool | None:
    """The pool of the group the contract shares now, if it does (`groups`: the groups it
    has been in, as its ledger read them)."""
    return next((p for p in pools(now, groups)
                 if any(c.pk == contract.pk for c, _g in p.members)), None)
