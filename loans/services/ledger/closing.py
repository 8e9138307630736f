"""Period close: once a period has ended and the late-data grace has passed, its statement is
written, once, with the corrections of earlier periods whose usage changed since their own
statements.
A contract whose last period is stated is marked ended. Nothing written is ever rewritten.
After a contract's last period, a correction goes on a corrections statement labelled with the
anniversary month it is written in, at most one a month.

A contract is closed in one transaction under its row's lock: concurrent closers (and
amendments, which take the same lock) queue, and each reads what the previous one wrote. A
contract that shares a group is closed with every contract it has shared with, under all their
locks (taken in id order), from one read of the group's usage: each period's lent and borrowed
lines agree, and the group's statement says what the group paid the provider.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db import connection, transaction

from core import audit
from loans.maths import billing
from loans.models import Contract, CorrectionLine, GroupStatement, SharingLine, Statement
from loans.models.contracts import with_amendments
from loans.services.ledger import read as ledgers
from loans.services.ledger import sharing
from metering.usage import fleet

COMPLETENESS = Decimal("0.0001")
ZERO = Decimal(0)


@dataclass(frozen=True)
class CloseRun:
    written: list[Statement]
    contracts: int


def close_due_periods(now: datetime, progress: Callable[[list[Statement]], None] | None = None
                      ) -> CloseRun:
    """Write every statement that is due, for every contract that holds instants; `progress`
    is told of each contract's statements as they are written."""
    written, count, handled = [], 0, set()
    contracts = Contract.objects.filter(status__in=Contract.HOLDING).select_related(
        "plan", "tenant").order_by("pk")
    for contract in contracts:
        count += 1
        if contract.pk not in handled and has_due(contract, now):
            done, closed = _close(contract, now)
            handled |= set(closed)  # a group's partners were closed with it
            written += done
            if progress and done:
                progress(done)
    return CloseRun(written, count)


def has_due(contract: Contract, now: datetime) -> bool:
    """Whether anything may be due: a period of the term or a later month has ended with its
    grace. (Whether a later month has corrections to state is known only by reading.)"""
    return ledgers.due(contract.periods()[0], now)


def close_contract(contract: Contract, now: datetime) -> list[Statement]:
    """Write the contract's due statements, oldest first, and those of every contract it has
    shared a group with; [] if none is due or all are written already (safe to run
    concurrently)."""
    return _close(contract, now)[0]


@dataclass
class Drafts:
    """A close's rows before they are written, so that each table takes one INSERT a close:
    statements, then their correction and sharing lines (which name them)."""

    statements: list[Statement] = field(default_factory=list)
    corrections: list[tuple[Statement, list, dict[int, Statement]]] = field(default_factory=list)
    sharing: list[tuple[Statement, ledgers.PeriodEntry]] = field(default_factory=list)

    def write(self) -> None:
        Statement.objects.bulk_create(self.statements)
        CorrectionLine.objects.bulk_create(
            line for statement, pending, stated in self.corrections
            for line in _lines(statement, pending, stated))
        SharingLine.objects.bulk_create(
            line for statement, entry in self.sharing for line in _sharing_lines(statement, entry))


def _close(contract: Contract, now: datetime) -> tuple[list[Statement], list[int]]:
    """close_contract, and the ids of the contracts it closed (the contract's partners)."""
    with transaction.atomic():
        ids = sharing.partners(contract)
        list(Contract.objects.select_for_update().filter(pk__in=ids).order_by("pk")
             .values_list("pk", flat=True))
        fresh_plans()
        groups = sharing.groups_of(ids)
        # Read-only terms, worked out once a member (the amendments cannot change under
        # the locks).
        members = with_amendments([
            m for m in Contract.objects.select_related("plan", "tenant").filter(pk__in=ids)
            .order_by("pk") if m.status in Contract.HOLDING])
        drafts, done_by, ending = Drafts(), {}, []
        read = ledgers.read_many(members, now, groups)
        due = [[e for e in ledger.entries if e.statement is None and ledgers.due(e.period, now)]
               for ledger in read]
        coverage = fleet.tenants_coverage_in(
            [(m.tenant_id, [(e.period.start, e.period.end) for e in entries])
             for m, entries in zip(members, due, strict=True)])
        for member, ledger, entries, complete in zip(members, read, due, coverage, strict=True):
            done, stated = _write_periods(member, ledger, entries, complete, drafts)
            done_by[member.pk] = done
            if len(stated) == len(member.periods()):
                ending.append(member)
        drafts.write()
        for member in ending:  # its corrections read the period statements just written
            done_by[member.pk] += _write_corrections_statement(member, now, groups)
            if member.status == Contract.Status.ACTIVE:
                Contract.objects.filter(pk=member.pk).update(status=Contract.Status.ENDED)
                audit.changed(member, {"status": member.status},
                              {"status": Contract.Status.ENDED}, tenant=member.tenant_id)
        written = []
        for member in members:
            written += done_by[member.pk]
        # Statements are not logged row by row: one entry a close of a contract.
        audit.wrote_many([(member, {"statements_written": (
            "", ", ".join(f"{s.number} {s.total_cost} {s.currency}" for s in done))},
            member.tenant_id) for member in members if (done := done_by[member.pk])])
        _write_group_statements(groups, written)
    return written, ids


def fresh_plans() -> None:
    """PostgreSQL plans the checks of the rows this transaction writes (their foreign keys,
    checked at commit) for the tables as they are: a plan cached by the connection while
    the statements' tables were small scans them whole for every row, and the first close
    of a fleet (11,000 statements) spent a third of its time there."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL plan_cache_mode = force_custom_plan")


def _write_periods(contract: Contract, ledger: ledgers.Ledger, due: list[ledgers.PeriodEntry],
                   complete: list[fleet.Coverage], drafts: Drafts
                   ) -> tuple[list[Statement], dict[int, Statement]]:
    """The due period statements (`due`, with the meter's coverage of each; drafted, for
    `drafts` to write), and every period statement by index once they are written."""
    stated = {e.period.index: e.statement for e in ledger.entries if e.statement}
    if not due:
        return [], stated
    # What each stated period has been billed, kept current through the run: a period stated
    # in this run is billed at the meter's figure, so later statements carry nothing for it
    # (so every line names a statement written before this close).
    billed = {e.period.index: e.billed for e in ledger.entries if e.statement}
    entries = {e.period.index: e for e in ledger.entries}
    fresh: set[int] = set()  # stated in this run at the meter's figure: nothing to correct
    written = []
    for entry, coverage in zip(due, complete, strict=True):
        pending = _pending(entries, billed, before=entry.period.index, fresh=fresh)
        statement = _statement(contract, entry, coverage, pending)
        drafts.statements.append(statement)
        drafts.corrections.append((statement, pending, dict(stated)))
        drafts.sharing.append((statement, entry))
        stated[entry.period.index], billed[entry.period.index] = (
            statement, entry.billed_after_close)
        fresh.add(entry.period.index)
        for earlier, change in pending:
            billed[earlier.period.index] = billing.Billed(
                change.billed_after_gpu_hours, change.overage_after_gpu_hours,
                change.overage_after_cost, change.sharing_after_cost, change.credit_after_cost)
        written.append(statement)
    return written, stated


def _pending(entries: dict[int, ledgers.PeriodEntry], billed: dict[int, billing.Billed], *,
             before: int, fresh: set[int]
             ) -> list[tuple[ledgers.PeriodEntry, billing.Correction]]:
    """Corrections of the stated periods before `before`, against what they are billed (those
    in `fresh` are billed at the usage read, so carry none)."""
    out = []
    for index, was in sorted(billed.items()):
        if index < before and index not in fresh and (
                change := entries[index].correction_from(was)) is not None:
            out.append((entries[index], change))
    return out


def _statement(contract: Contract, entry: ledgers.PeriodEntry, coverage: fleet.Coverage,
               pending: list) -> Statement:
    terms, cost, shared = entry.terms, entry.cost, entry.shared
    corrections = sum((c.amount for _e, c in pending), ZERO)
    # The contract's one-time fee is billed once, with its first period.
    fee = billing.money(terms.upfront_fee, terms.currency) if entry.period.index == 0 else ZERO
    # In a sharing group the overage billed is what is left after borrowing, and the sharing
    # (borrowed less lent) is a line of its own.
    overage_hours = shared.overage_gpu_hours if shared else cost.overage_gpu_hours
    overage_cost = shared.overage_cost if shared else cost.overage_cost
    shared_cost = shared.shared_cost if shared else ZERO
    # The floor over the whole period, and what it credits (DESIGN "The floor").
    floor, credit = entry.floor, entry.credit
    return Statement(
        contract=contract, kind=Statement.Kind.PERIOD, period_index=entry.period.index,
        period_start=entry.period.start, period_end=entry.period.end,
        committed_gpu_hours=cost.committed_gpu_hours, allocated_gpu_hours=cost.used_gpu_hours,
        busy_gpu_hours=entry.busy, overage_gpu_hours=overage_hours,
        unused_gpu_hours=cost.unused_gpu_hours, committed_rate=terms.committed_rate,
        overage_rate=terms.overage_rate, committed_cost=cost.committed_cost,
        overage_cost=overage_cost, shared_cost=shared_cost,
        standalone_overage_cost=cost.overage_cost if shared else None,
        corrections_gpu_hours=sum((c.gpu_hours for _e, c in pending), ZERO),
        corrections_cost=corrections, upfront_fee=fee,
        availability=floor.availability if floor else None,
        guarantee_pct=terms.guarantee_pct,
        short_gpu_hours=floor.short_gpu_hours if floor else ZERO,
        credit_pct=floor.credit_pct if floor else ZERO, credit=credit,
        total_cost=cost.committed_cost + overage_cost + shared_cost + corrections + fee + credit,
        plan_name=contract.plan.name,
        currency=terms.currency,
        completeness=min(Decimal(1), Decimal(repr(coverage.share)).quantize(COMPLETENESS)),
        data_from=coverage.data_from,
    )


def _lines(statement: Statement, pending: list, stated: dict[int, Statement]
           ) -> list[CorrectionLine]:
    return [
        CorrectionLine(
            statement=statement, corrected=stated[entry.period.index],
            period_index=entry.period.index, gpu_hours=c.gpu_hours,
            billed_gpu_hours=c.billed_gpu_hours, committed_gpu_hours=c.committed_gpu_hours,
            overage_rate=c.overage_rate, overage_before_gpu_hours=c.overage_before_gpu_hours,
            overage_after_gpu_hours=c.overage_after_gpu_hours,
            overage_before_cost=c.overage_before_cost, overage_after_cost=c.overage_after_cost,
            sharing_before_cost=c.sharing_before_cost, sharing_after_cost=c.sharing_after_cost,
            credit_before_cost=c.credit_before_cost, credit_after_cost=c.credit_after_cost,
            amount=c.amount)
        for entry, c in pending]


def _sharing_lines(statement: Statement, entry: ledgers.PeriodEntry) -> list[SharingLine]:
    shared = entry.shared
    if shared is None:
        return []
    return (
        [SharingLine(statement=statement, kind=SharingLine.Kind.BORROWED, counterpart_id=t.lender,
                     group_id=entry.group_id, gpu_hours=t.gpu_hours, rate=t.rate,
                     amount=t.amount) for t in shared.borrowed]
        + [SharingLine(statement=statement, kind=SharingLine.Kind.LENT, counterpart_id=t.borrower,
                       group_id=entry.group_id, gpu_hours=t.gpu_hours, rate=t.rate,
                       amount=t.amount) for t in shared.lent])


def _write_group_statements(groups: sharing.Groups, written: list[Statement]) -> None:
    """A group statement for each group period whose members were all stated in this close:
    what the group paid the provider, and what sharing saved (one INSERT for them all, one
    for their members)."""
    made: list[tuple[GroupStatement, list[Statement]]] = []
    for (group_id, start), rows in groups.members.items():
        members = {m.contract_id for m in rows}
        mine = [s for s in written if s.contract_id in members and s.period_start == start
                and s.kind == Statement.Kind.PERIOD]
        if not rows or len(mine) != len(members):
            continue
        shared = groups.sharing[(group_id, start)]
        committed = sum((s.committed_cost for s in mine), ZERO)
        overage = sum((s.overage_cost for s in mine), ZERO)  # left after sharing
        made.append((GroupStatement(
            group_id=group_id, period_start=start, period_end=mine[0].period_end,
            committed_cost=committed, overage_cost=overage, provider_total=committed + overage,
            saving=sum((s.sharing_saving for s in mine), ZERO),
            shared_gpu_hours=sum((x.borrowed_gpu_hours for x in shared.values()), ZERO),
            currency=rows[0].terms.currency), mine))
    GroupStatement.objects.bulk_create([group for group, _mine in made])
    through = GroupStatement.member_statements.through
    through.objects.bulk_create(through(groupstatement=group, statement=statement)
                                for group, mine in made for statement in mine)


def _write_corrections_statement(contract: Contract, now: datetime,
                                 groups: sharing.Groups | None = None) -> list[Statement]:
    """After the last period and its grace: the corrections pending, on a statement labelled
    with the anniversary month it is written in (as FOCUS bills it), one such month at most."""
    ledger = ledgers.read(contract, now, groups)
    pending = ledger.pending
    if not pending or not ledgers.due(contract.periods()[-1], now):
        return []
    month = month_of(contract, now)
    if any(s.period_index >= month.index for s in ledger.statements):
        return []  # this month's is written: the next month's carries what came since
    terms = ledger.entries[-1].terms
    corrections = sum((c.amount for _e, c in pending), ZERO)
    statement = Statement.objects.create(
        contract=contract, kind=Statement.Kind.CORRECTIONS, period_index=month.index,
        period_start=month.start, period_end=month.end, committed_gpu_hours=ZERO,
        allocated_gpu_hours=ZERO, busy_gpu_hours=ZERO, overage_gpu_hours=ZERO,
        unused_gpu_hours=ZERO, committed_rate=terms.committed_rate,
        overage_rate=terms.overage_rate, committed_cost=ZERO, overage_cost=ZERO,
        corrections_gpu_hours=sum((c.gpu_hours for _e, c in pending), ZERO),
        corrections_cost=corrections, total_cost=corrections, currency=terms.currency,
        plan_name=contract.plan.name,
        completeness=Decimal(1))
    CorrectionLine.objects.bulk_create(
        _lines(statement, pending, {s.period_index: s for s in ledger.statements}))
    return [statement]


def month_of(contract: Contract, moment: datetime) -> billing.Period:
    """The anniversary month of the contract's start that holds `moment`, past its term too
    (the month a corrections statement written then is labelled and billed in)."""
    index = len(contract.periods())
    while True:
        month = billing.period_of(contract.starts_on, index, contract.zone)
        if moment < month.end:
            return month
        index += 1
