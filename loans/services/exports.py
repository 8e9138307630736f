"""A contract's statements as a finance team loads them: every statement with its lines and the
terms it was priced with, and one row per charge for CSV (the same charges in the FinOps FOCUS
1.2 columns: loans.services.focus). Every figure comes from the stored statements, correction
and sharing lines (loans.services.ledger.read reads them); nothing is priced here."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from loans.maths import billing
from loans.models import Contract, CorrectionLine, SharingLine, Statement
from loans.services.ledger.read import Ledger

ZERO = Decimal(0)
UNIT = "GPU-Hours"


@dataclass(frozen=True)
class Line:
    """One charge of a statement: the commitment, the overage, or a correction of an earlier
    period. rate x gpu_hours, rounded to the cent, is the amount (a correction prints the
    overage billed before and after; its amount is their difference)."""

    statement: Statement
    kind: str  # "upfront_fee", "commitment", "overage", "borrowed", "lent", "correction"
    gpu_hours: Decimal
    rate: Decimal
    amount: Decimal  # a lent line's is a credit: negative
    corrects: CorrectionLine | None = None
    shares: SharingLine | None = None

    @property
    def charge_period(self) -> billing.Period:
        """The period the charge is for: its own, or the one a correction corrects."""
        if self.corrects is not None:
            return self.corrects.corrected.period
        return self.statement.period


def lines(statement: Statement) -> list[Line]:
    """The statement's lines, each amount as its currency writes it (the columns keep more
    places than any currency's minor unit)."""
    def amount(value: Decimal) -> Decimal:
        return billing.money(value, statement.currency)

    out = []
    if statement.upfront_fee:  # the contract's one-time fee, on its first statement
        fee = amount(statement.upfront_fee)
        out.append(Line(statement, "upfront_fee", Decimal(1), fee, fee))
    if statement.kind == Statement.Kind.PERIOD:
        out += [Line(statement, "commitment", statement.committed_gpu_hours,
                     statement.committed_rate, amount(statement.committed_cost)),
                Line(statement, "overage", statement.overage_gpu_hours, statement.overage_rate,
                     amount(statement.overage_cost))]
        # In a sharing group: committed GPU-hours borrowed (at the lender's committed rate)
        # and lent (credited at this contract's).
        out += [Line(statement, x.kind, x.gpu_hours, x.rate, amount(x.signed_amount),
                     shares=x) for x in statement.shared_lines]
    # A correction prices the change in overage (hours that stay under the commitment cost
    # nothing): rate x those GPU-hours is its amount, up to the rounding of each side.
    out += [Line(statement, "correction", c.overage_change_gpu_hours, c.overage_rate,
                 amount(c.amount), c)
            for c in statement.corrections.all()]
    return out


def _iso(moment: datetime, contract: Contract) -> str:
    return moment.astimezone(contract.zone).isoformat()


def statements_json(book: Ledger) -> dict:
    contract = book.contract
    terms = {e.period.index: e.terms for e in book.entries}
    return {
        "contract": contract.pk, "tenant": contract.tenant.slug, "plan": contract.plan.name,
        "time_zone": contract.time_zone, "currency": contract.currency,
        "billed_total": str(billing.money(book.billed_money, contract.currency)),
        "statements": [_statement(s, terms.get(s.period_index), contract)
                       for s in book.statements],
        "pending_corrections": [
            {"period": entry.period.index + 1, **_correction_figures(c, contract.currency)}
            for entry, c in book.pending],
    }


def _statement(s: Statement, terms: billing.Terms | None, contract: Contract) -> dict:
    return {
        "number": s.number, "kind": s.kind, "closed_at": s.closed_at.isoformat(),
        "period": {"number": s.number, "start": _iso(s.period_start, contract),
                   "end": _iso(s.period_end, contract)},
        "terms": None if s.kind != Statement.Kind.PERIOD else {
            "committed_gpu_hours": str(s.committed_gpu_hours),
            "committed_rate": str(s.committed_rate), "overage_rate": str(s.overage_rate),
            "base_quota_gpus": terms.base_quota_gpus if terms else None,
            "max_quota_gpus": terms.max_quota_gpus if terms else None},
        "allocated_gpu_hours": str(s.allocated_gpu_hours),
        "busy_gpu_hours": str(s.busy_gpu_hours), "completeness": str(s.completeness),
        "lines": [_line(line) for line in lines(s)],
        "sharing": None if s.standalone_overage_cost is None else {
            "overage_without_sharing": str(billing.money(s.standalone_overage_cost,
                                                         s.currency)),
            "shared_cost": str(billing.money(s.shared_cost, s.currency)),
            "saving": str(billing.money(s.sharing_saving, s.currency))},
        "total": str(billing.money(s.total_cost, s.currency)), "currency": s.currency,
    }


def _line(line: Line) -> dict:
    out = {"kind": line.kind, "gpu_hours": str(line.gpu_hours), "rate": str(line.rate),
           "amount": str(line.amount)}
    if line.shares is not None:
        other = line.shares.counterpart
        out |= {"counterpart": {"contract": other.pk, "tenant": other.tenant.name},
                "group": line.shares.group.name}
    if line.corrects is not None:
        out |= {"corrects_period": line.corrects.period_index + 1,
                **_correction_figures(line.corrects, line.statement.currency)}
    return out


def _correction_figures(c, currency: str) -> dict:
    def amount(value: Decimal) -> str:
        return str(billing.money(value, currency))

    return {
        "gpu_hours": str(c.gpu_hours), "billed_gpu_hours": str(c.billed_gpu_hours),
        "committed_gpu_hours": str(c.committed_gpu_hours), "overage_rate": str(c.overage_rate),
        "overage_before": {"gpu_hours": str(c.overage_before_gpu_hours),
                           "amount": amount(c.overage_before_cost)},
        "overage_after": {"gpu_hours": str(c.overage_after_gpu_hours),
                          "amount": amount(c.overage_after_cost)},
        "sharing_before": amount(c.sharing_before_cost),
        "sharing_after": amount(c.sharing_after_cost),
        "amount": amount(c.amount),
    }


CSV_COLUMNS = ("statement", "kind", "period_start", "period_end", "line", "corrects_period",
               "gpu_hours", "rate", "amount", "currency")


def csv_rows(book: Ledger) -> list[list]:
    contract = book.contract
    rows = []
    for s in book.statements:
        for line in lines(s):
            rows.append([s.number, s.kind, _iso(s.period_start, contract),
                         _iso(s.period_end, contract), line.kind,
                         line.corrects.period_index + 1 if line.corrects else "",
                         line.gpu_hours, line.rate, line.amount, s.currency])
    return rows
