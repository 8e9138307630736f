"""Period close: once a period has ended and the late-data grace has passed, its statement is
written, once, with the corrections of earlier periods whose usage changed since their own
statements. After a contract's last period, corrections are stated on corrections statements,
one for each later anniversary month that has any, once that month and its grace are over.
A contract whose last period is stated is marked ended. Nothing written is ever rewritten.

A contract is closed in one transaction under its row's lock: concurrent closers (and
amendments, which take the same lock) queue, and each reads what the previous one wrote.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction

from loans.maths import billing
from loans.models import Contract, CorrectionLine, Statement
from loans.services import ledger
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
    written, count = [], 0
    contracts = Contract.objects.filter(status__in=Contract.HOLDING).select_related(
        "plan", "tenant").order_by("pk")
    for contract in contracts:
        count += 1
        if has_due(contract, now):
            done = close_contract(contract, now)
            written += done
            if progress and done:
                progress(done)
    return CloseRun(written, count)


def has_due(contract: Contract, now: datetime) -> bool:
    """Whether anything may be due: a period of the term or a later month has ended with its
    grace. (Whether a later month has corrections to state is known only by reading.)"""
    return ledger.due(contract.periods()[0], now)


def close_contract(contract: Contract, now: datetime) -> list[Statement]:
    """Write the contract's due statements, oldest first; [] if none is due or all are
    written already (safe to run concurrently)."""
    with transaction.atomic():
        Contract.objects.select_for_update().filter(pk=contract.pk).first()
        contract = (Contract.objects.select_related("plan", "tenant")
                    .prefetch_related("amendments").get(pk=contract.pk))
        book = ledger.read(contract, now)
        written, stated = _write_periods(contract, book, now)
        if len(stated) == len(contract.periods()):
            written += _write_corrections_statement(contract, now)
            if contract.status == Contract.Status.ACTIVE:
                Contract.objects.filter(pk=contract.pk).update(status=Contract.Status.ENDED)
    return written


def _write_periods(contract: Contract, book: ledger.Ledger, now: datetime
                   ) -> tuple[list[Statement], dict[int, Statement]]:
    """The due period statements, and every period statement by index once they are written."""
    stated = {e.period.index: e.statement for e in book.entries if e.statement}
    due = [e for e in book.entries if e.statement is None and ledger.due(e.period, now)]
    if not due:
        return [], stated
    complete = fleet.tenant_coverage_in(contract.tenant_id,
                                        [(e.period.start, e.period.end) for e in due])
    # What each stated period has been billed, kept current through the run: a period stated
    # in this run is billed at the meter's figure, so later statements carry nothing for it.
    billed = {e.period.index: e.billed_gpu_hours for e in book.entries if e.statement}
    written = []
    for entry, coverage in zip(due, complete, strict=True):
        pending = _pending(book.entries, billed, before=entry.period.index)
        statement = _statement(contract, entry, coverage, pending)
        _lines(statement, pending, stated)
        stated[entry.period.index], billed[entry.period.index] = statement, entry.metered
        for earlier, change in pending:
            billed[earlier.period.index] = change.billed_after_gpu_hours
        written.append(statement)
    return written, stated


def _pending(entries: list[ledger.PeriodEntry], billed: dict[int, Decimal], *, before: int
             ) -> list[tuple[ledger.PeriodEntry, billing.Correction]]:
    """Corrections of the stated periods before `before`, against what they are billed."""
    out = []
    for entry in entries:
        if entry.period.index < before and entry.period.index in billed:
            change = billing.correction(entry.terms, billed=billed[entry.period.index],
                                        metered=entry.metered)
            if change is not None:
                out.append((entry, change))
    return out


def _statement(contract: Contract, entry: ledger.PeriodEntry, coverage: fleet.Coverage,
               pending: list) -> Statement:
    terms, cost = entry.terms, entry.cost
    corrections = sum((c.amount for _e, c in pending), ZERO)
    # The contract's one-time fee is billed once, with its first period.
    fee = billing.money(terms.upfront_fee, terms.currency) if entry.period.index == 0 else ZERO
    return Statement.objects.create(
        contract=contract, kind=Statement.Kind.PERIOD, period_index=entry.period.index,
        period_start=entry.period.start, period_end=entry.period.end,
        committed_gpu_hours=cost.committed_gpu_hours, allocated_gpu_hours=cost.used_gpu_hours,
        busy_gpu_hours=entry.busy, overage_gpu_hours=cost.overage_gpu_hours,
        unused_gpu_hours=cost.unused_gpu_hours, committed_rate=terms.committed_rate,
        overage_rate=terms.overage_rate, committed_cost=cost.committed_cost,
        overage_cost=cost.overage_cost,
        corrections_gpu_hours=sum((c.gpu_hours for _e, c in pending), ZERO),
        corrections_cost=corrections, upfront_fee=fee, total_cost=cost.total + corrections + fee,
        plan_name=contract.plan.name,
        currency=terms.currency,
        completeness=min(Decimal(1), Decimal(repr(coverage.share)).quantize(COMPLETENESS)),
        data_from=coverage.data_from,
    )


def _lines(statement: Statement, pending: list, stated: dict[int, Statement]) -> None:
    CorrectionLine.objects.bulk_create(
        CorrectionLine(
            statement=statement, corrected=stated[entry.period.index],
            period_index=entry.period.index, gpu_hours=c.gpu_hours,
            billed_gpu_hours=c.billed_gpu_hours, committed_gpu_hours=c.committed_gpu_hours,
            overage_rate=c.overage_rate, overage_before_gpu_hours=c.overage_before_gpu_hours,
            overage_after_gpu_hours=c.overage_after_gpu_hours,
            overage_before_cost=c.overage_before_cost, overage_after_cost=c.overage_after_cost,
            amount=c.amount)
        for entry, c in pending)


def _write_corrections_statement(contract: Contract, now: datetime) -> list[Statement]:
    """After the last period: the corrections pending, on the statement of the first later
    anniversary month that has ended with its grace and has none yet."""
    book = ledger.read(contract, now)
    pending = book.pending
    if not pending:
        return []
    last = max(s.period_index for s in book.statements)
    month = billing.period_of(contract.starts_on, last + 1, contract.zone)
    if not ledger.due(month, now):
        return []
    terms = book.entries[-1].terms
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
    _lines(statement, pending, {s.period_index: s for s in book.statements})
    return [statement]
