"""A statement's charges, each with its GPU-hours, rate and amount: the commitment, the overage,
what sharing borrowed and lent, the service credit its floor earned, and the corrections of
earlier periods. Every export reads a
statement through these lines, so none prices anything."""

from dataclasses import dataclass
from decimal import Decimal

from loans.maths import billing
from loans.models import CorrectionLine, SharingLine, Statement

ZERO = Decimal(0)
UNIT = "GPU-Hours"


@dataclass(frozen=True)
class Line:
    """One charge of a statement: the commitment, the overage, or a correction of an earlier
    period. rate x gpu_hours, rounded to the cent, is the amount (a correction prints the
    overage billed before and after; its amount is their difference)."""

    statement: Statement
    # "upfront_fee", "commitment", "overage", "borrowed", "lent", "credit", "correction"
    kind: str
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
        # The service credit: one credit of its amount (negative), as the upfront fee is one
        # fee (the percent of the committed cost it is, and why, are the statement's).
        if statement.credit:
            credit = amount(statement.credit)
            out.append(Line(statement, "credit", Decimal(1), credit, credit))
    # A correction prices the change in overage (hours that stay under the commitment cost
    # nothing): rate x those GPU-hours is its amount, up to the rounding of each side.
    out += [Line(statement, "correction", c.overage_change_gpu_hours, c.overage_rate,
                 amount(c.amount), c)
            for c in statement.corrections.all()]
    return out
