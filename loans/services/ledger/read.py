"""The one reader of a contract's money: every period with the terms in force at its start,
what the meter holds for it, what its statement billed, the corrections written since and the
correction still pending. Pages, the API, the jobs, the admin and /metrics all read periods
here, so they cannot disagree.

The rules (README "Statements and corrections"): a period is priced with the terms in force at
its start; its statement bills it once, when it has ended and the late-data grace has passed;
usage that reaches it later is priced as a correction, cost(billed + change) - cost(billed)
under the period's own terms, on the contract's next statement (after the last period, on a
corrections statement for a later anniversary month). So the money billed for a period over
all its statements is the cost of its final usage: corrections telescope. The same holds for
its service credit (DESIGN "The floor"): a period's availability is measured again from the
waits the schedulers have reported since its statement, and a changed credit is a correction
too (a period whose raw samples are purged keeps the credit it was billed).
"""

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from functools import cached_property

from django.conf import settings
from django.db.models import Prefetch

from loans.maths import billing
from loans.maths.billing import Billed, Correction, PeriodCost, Terms
from loans.maths.sharing import Shared
from loans.models import Contract, CorrectionLine, SharingLine, Statement
from loans.services.guarantee import measure as floor
from loans.services.guarantee.measure import Floor
from loans.services.ledger import sharing
from metering import usage

ZERO = Decimal(0)


def grace() -> timedelta:
    return timedelta(hours=settings.LATE_DATA_GRACE_HOURS)


def due(period: billing.Period, now: datetime) -> bool:
    """A period's statement is due once it has ended and the late-data grace has passed."""
    return now >= period.end + grace()


@dataclass(frozen=True)
class PeriodEntry:
    """One period of a contract as the ledger sees it at `now`."""

    period: billing.Period
    terms: Terms
    state: str  # "closed" (stated), "ended" (awaiting its statement), "open"
    metered: Decimal  # allocated GPU-hours the meter holds for it (so far, when open)
    busy: Decimal
    statement: Statement | None = None
    lines: list[CorrectionLine] = field(default_factory=list)  # corrections of it, written
    shared: Shared | None = None  # in a sharing group: its period after sharing (so far)
    group_id: int | None = None
    floor: Floor | None = None  # its floor measured now (None: cannot be, raw samples purged)

    @property
    def billed_gpu_hours(self) -> Decimal | None:
        """Allocated GPU-hours billed for it: its statement's, with every correction since."""
        if self.statement is None:
            return None
        return self.statement.allocated_gpu_hours + sum((c.gpu_hours for c in self.lines), ZERO)

    @property
    def billed_money(self) -> Decimal:
        """The money billed for it so far, over every statement (its own and corrections)."""
        if self.statement is None:
            return ZERO
        own = (self.statement.committed_cost + self.statement.overage_cost
               + self.statement.shared_cost + self.statement.credit)
        return own + sum((c.amount for c in self.lines), ZERO)

    @property
    def billed(self) -> Billed | None:
        """What it has been billed so far: its statement's figures, or its last correction's."""
        if self.statement is None:
            return None
        if self.lines:
            last = self.lines[-1]
            return Billed(self.billed_gpu_hours, last.overage_after_gpu_hours,
                          last.overage_after_cost, last.sharing_after_cost,
                          last.credit_after_cost)
        s = self.statement
        return Billed(s.allocated_gpu_hours, s.overage_gpu_hours, s.overage_cost, s.shared_cost,
                      s.credit)

    @property
    def credit(self) -> Decimal:
        """The service credit its floor earns now (negative, or 0); a stated period that cannot
        be measured again keeps what it was billed."""
        if self.floor is None:
            return self.billed.credit if self.statement is not None else ZERO
        return billing.service_credit(self.cost.committed_cost, self.floor.credit_pct,
                                      self.terms.currency)

    @property
    def stated_shared(self) -> bool:
        """Whether its statement was written in a sharing group (its sharing is re-run)."""
        return self.statement is not None and self.statement.standalone_overage_cost is not None

    @property
    def pending(self) -> Correction | None:
        """The correction the next statement will carry for it (closed periods only)."""
        if self.statement is None:
            return None
        return self.correction_from(self.billed)

    def correction_from(self, billed: Billed) -> Correction | None:
        """The correction of what `billed` says was billed, at the usage the meter holds now;
        in a sharing group, with the group's sharing re-run."""
        credit = self.credit if self.floor is not None else billed.credit
        if self.stated_shared and self.shared is not None:
            return billing.shared_correction(
                self.terms, billed=billed, metered=self.metered,
                overage_gpu_hours=self.shared.overage_gpu_hours,
                overage_cost=self.shared.overage_cost, sharing=self.shared.shared_cost,
                credit=credit)
        return billing.correction(self.terms, billed=billed.gpu_hours, metered=self.metered,
                                  billed_credit=billed.credit, credit=credit)

    @property
    def billed_after_close(self) -> Billed:
        """What a statement written now bills for it: its usage, after sharing in a group."""
        if self.shared is not None:
            return Billed(self.metered, self.shared.overage_gpu_hours, self.shared.overage_cost,
                          self.shared.shared_cost, self.credit)
        cost = self.cost
        return Billed(self.metered, cost.overage_gpu_hours, cost.overage_cost, credit=self.credit)

    @cached_property
    def cost(self) -> PeriodCost:
        """Its cost at the usage the meter holds now: final once closed and corrected (worked
        out once: the close asks for it of every period for every statement it drafts)."""
        return self.terms.cost(self.metered)

    # What the periods table shows: in a sharing group, the money after sharing.
    @property
    def overage_cost(self) -> Decimal:
        return self.shared.overage_cost if self.shared else self.cost.overage_cost

    @property
    def shared_cost(self) -> Decimal:
        """Paid for committed GPU-hours borrowed less credited for those lent."""
        return self.shared.shared_cost if self.shared else ZERO

    @property
    def total(self) -> Decimal:
        return self.cost.committed_cost + self.overage_cost + self.shared_cost + self.credit

    @property
    def borrowed_gpu_hours(self) -> Decimal:
        return self.shared.borrowed_gpu_hours if self.shared else ZERO

    @property
    def lent_gpu_hours(self) -> Decimal:
        return self.shared.lent_gpu_hours if self.shared else ZERO

    @property
    def committed_gpu_hours(self) -> Decimal:
        return self.terms.committed_gpu_hours

    @property
    def used_gpu_hours(self) -> Decimal:
        return billing.gpu_hours(self.metered)

    @property
    def busy_gpu_hours(self) -> Decimal:
        return billing.gpu_hours(self.busy)

    @property
    def corrected_gpu_hours(self) -> Decimal:
        """GPU-hours its usage changed by after its statement (billed since, or pending)."""
        if self.statement is None:
            return ZERO
        return billing.gpu_hours(self.metered) - self.statement.allocated_gpu_hours

    @property
    def completeness(self) -> Decimal | None:
        return None if self.statement is None else self.statement.completeness

    @property
    def data_from(self) -> datetime | None:
        """When the meter first heard of the period, where that came after its start."""
        return None if self.statement is None else self.statement.data_from


@dataclass(frozen=True)
class Ledger:
    contract: Contract
    now: datetime
    entries: list[PeriodEntry]  # every period that has started, in order
    statements: list[Statement]  # every statement, period and corrections ones, in order
    groups: sharing.Groups = field(default_factory=sharing.Groups)  # the groups it shared

    @property
    def pending(self) -> list[tuple[PeriodEntry, Correction]]:
        """Corrections not billed yet, by period: they go on the next statement."""
        return [(e, c) for e in self.entries if (c := e.pending) is not None]

    @property
    def pending_amount(self) -> Decimal:
        return sum((c.amount for _e, c in self.pending), ZERO)

    @property
    def billed_money(self) -> Decimal:
        return sum((s.total_cost for s in self.statements), ZERO)

    def entry_for(self, period: billing.Period) -> PeriodEntry | None:
        return next((e for e in self.entries if e.period.index == period.index), None)

    @property
    def current(self) -> PeriodEntry | None:
        return next((e for e in self.entries if e.period.contains(self.now)), None)


def _statements(contracts: list[Contract], shared: bool) -> dict[int, list[Statement]]:
    """Each contract's statements with their correction lines, and their sharing lines where
    they have been in a group (`shared`), in order: three queries for them all."""
    out: dict[int, list[Statement]] = {c.pk: [] for c in contracts}
    todo = []
    for contract in contracts:
        cached = getattr(contract, "_prefetched_objects_cache", {}).get("statements")
        if cached is not None:
            out[contract.pk] = sorted(cached, key=lambda s: (s.period_index, s.pk))
        else:
            todo.append(contract.pk)
    if not todo:
        return out
    lines = [Prefetch("corrections", queryset=CorrectionLine.objects.order_by("period_index"))]
    if shared:
        lines.append(Prefetch("sharing_lines", queryset=SharingLine.objects.select_related(
            "counterpart__tenant", "group")))
    for statement in (Statement.objects.filter(contract_id__in=todo).prefetch_related(*lines)
                      .order_by("contract_id", "period_index", "pk")):
        out[statement.contract_id].append(statement)
    return out


def read(contract: Contract, now: datetime, groups: sharing.Groups | None = None) -> Ledger:
    """The contract's ledger as of `now`: a constant number of queries whatever its length.
    Its periods that ended in a sharing group carry their sharing (`groups`: the close's, so
    that every member of a group reads the same usage)."""
    return read_many([contract], now, groups)[0]


def read_many(contracts: list[Contract], now: datetime, groups: sharing.Groups | None = None
              ) -> list[Ledger]:
    """read() for many contracts (the members of a close), in the same constant number of
    queries as one: their statements, every period's usage and floor each read once for
    them all, and the usage shared with the groups' sharing."""
    if groups is None:
        groups = sharing.groups_of([c.pk for c in contracts])
    statements = _statements(contracts, bool(groups.rows))
    started = {c.pk: [p for p in c.periods() if p.start <= now] for c in contracts}
    terms = {c.pk: [c.terms_for(p.index) for p in started[c.pk]] for c in contracts}
    totals = iter(groups.totals_of([(c.tenant_id, p.start, min(p.end, now))
                                    for c in contracts for p in started[c.pk]]))
    floors = floor.read_many([(c, list(zip(started[c.pk], terms[c.pk], strict=True)))
                              for c in contracts], now)
    ledgers = []
    for contract in contracts:
        mine = statements[contract.pk]
        by_index = {s.period_index: s for s in mine if s.kind == Statement.Kind.PERIOD}
        lines: dict[int, list[CorrectionLine]] = {}
        for statement in mine:
            for line in statement.corrections.all():
                lines.setdefault(line.period_index, []).append(line)
        entries = []
        for period, in_force in zip(started[contract.pk], terms[contract.pk], strict=True):
            metered = next(totals)
            statement = by_index.get(period.index)
            state = "closed" if statement else ("open" if now < period.end else "ended")
            entries.append(PeriodEntry(
                period=period, terms=in_force, state=state,
                metered=billing.gpu_hours(metered.allocated_gpu_hours),
                busy=billing.gpu_hours(metered.busy_gpu_hours), statement=statement,
                lines=lines.get(period.index, []),
                floor=floors[contract.pk].get(period.index)))
        ledgers.append((contract, entries, mine))
    # Every group period of them all worked out at once, from the usage read above.
    found = {contract.pk: [(e, g) for e in entries
                           if (g := groups.group_at(contract.pk, e.period.start)) is not None]
             for contract, entries, _s in ledgers} if groups.rows else {}
    sharing.work_out(groups, [(g, e.period) for pairs in found.values() for e, g in pairs],
                     now)
    return [Ledger(contract, now, _with_sharing(contract, entries, found.get(contract.pk, []),
                                                groups), mine, groups)
            for contract, entries, mine in ledgers]


def _with_sharing(contract: Contract, entries: list[PeriodEntry], found: list,
                  groups: sharing.Groups) -> list[PeriodEntry]:
    """The periods shared in a group (`found`: each with its group), each with its sharing at
    the usage held now (the open one's at every member's usage so far: what closing it now
    would bill)."""
    if not found:
        return entries
    shared = {e.period.index: (g, sharing.shared(groups, contract.pk, e.period))
              for e, g in found}
    return [replace(e, group_id=shared[e.period.index][0], shared=shared[e.period.index][1])
            if e.period.index in shared else e for e in entries]


def period_entry(contract: Contract, period: billing.Period, now: datetime) -> PeriodEntry:
    """One period as read(contract, now) reads it, without its statement (for the live
    figures of a period: the burn-down, the fleet, alerts, /metrics): the same aggregate,
    the same terms."""
    [metered] = usage.span_totals([(contract.tenant_id, period.start, min(period.end, now))])
    return live_entry(contract, period, now, metered)


def period_entries(pairs: list[tuple[Contract, billing.Period]], now: datetime
                   ) -> dict[int, PeriodEntry]:
    """period_entry for many contracts' periods (the admin's list), keyed by contract id, in
    one read of the meter: the same hours and sums as period_entry's."""
    totals = usage.span_totals([(c.tenant_id, p.start, min(p.end, now)) for c, p in pairs])
    return {c.pk: live_entry(c, p, now, metered)
            for (c, p), metered in zip(pairs, totals, strict=True)}


def live_entry(contract: Contract, period: billing.Period, now: datetime, metered) -> PeriodEntry:
    return PeriodEntry(
        period=period, terms=contract.terms_for(period.index),
        state="open" if now < period.end else "ended",
        metered=billing.gpu_hours(metered.allocated_gpu_hours),
        busy=billing.gpu_hours(metered.busy_gpu_hours))


def totals(entries: list[PeriodEntry]) -> dict[str, Decimal]:
    """Sums over periods, at the usage the meter holds now: GPU-hours and money add; nothing
    here averages."""
    costs = [e.cost for e in entries]
    return {
        "committed_gpu_hours": sum((e.committed_gpu_hours for e in entries), ZERO),
        "used_gpu_hours": sum((e.used_gpu_hours for e in entries), ZERO),
        "busy_gpu_hours": sum((e.busy_gpu_hours for e in entries), ZERO),
        "overage_gpu_hours": sum((c.overage_gpu_hours for c in costs), ZERO),
        "unused_gpu_hours": sum((c.unused_gpu_hours for c in costs), ZERO),
        "cost": sum((c.total for c in costs), ZERO),
    }
