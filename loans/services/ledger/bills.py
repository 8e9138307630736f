"""What a period bills, in the words every surface uses (DESIGN "Every surface reads the
ledger"): a stated period's statement; an open or ended period's statement as it would be
written now (sharing at every member's usage so far); the projection priced the same way;
the whole contract as its statements, its pending corrections and what is not stated yet.
Pages, exports, alerts and the API read these, never terms.cost of their own.

The words: *past the commitment* is what the contract used beyond its own commitment, before
sharing; *overage* the hours (and money) billed at the overage rate after sharing;
*borrowed* and *lent* the hours covered by, or given to, a partner's commitment; *unused*
committed hours neither used nor lent; *saving* what the period would have cost alone less
what it costs with sharing.
"""

from dataclasses import dataclass
from decimal import Decimal

from loans.maths import billing
from loans.maths.billing import Terms
from loans.maths.sharing import Shared
from loans.models import Statement

ZERO = Decimal(0)


@dataclass(frozen=True)
class Bill:
    currency: str
    committed_gpu_hours: Decimal
    used_gpu_hours: Decimal
    overage_gpu_hours: Decimal  # billed at the overage rate, after sharing
    borrowed_gpu_hours: Decimal
    lent_gpu_hours: Decimal
    committed_cost: Decimal
    overage_cost: Decimal
    sharing_cost: Decimal  # paid for hours borrowed less credited for hours lent
    upfront_fee: Decimal
    alone_overage_cost: Decimal  # what its overage would have cost alone
    committed_rate: Decimal = ZERO
    stated: bool = False  # read from a statement written at close
    credit: Decimal = ZERO  # the service credit its floor earned (negative, or 0)

    @property
    def past_commitment_gpu_hours(self) -> Decimal:
        return max(ZERO, self.used_gpu_hours - self.committed_gpu_hours)

    @property
    def unused_gpu_hours(self) -> Decimal:
        """Committed GPU-hours neither used nor lent to a partner."""
        return max(ZERO, self.committed_gpu_hours - self.used_gpu_hours - self.lent_gpu_hours)

    @property
    def unused_money(self) -> Decimal:
        """What the committed GPU-hours neither used nor lent cost: paid for, not used."""
        return billing.money(self.unused_gpu_hours * self.committed_rate, self.currency)

    @property
    def total(self) -> Decimal:
        return (self.committed_cost + self.overage_cost + self.sharing_cost + self.upfront_fee
                + self.credit)

    @property
    def alone_total(self) -> Decimal:
        """What it would cost alone: the credit is its own, shared or not."""
        return self.committed_cost + self.alone_overage_cost + self.upfront_fee + self.credit

    @property
    def saving(self) -> Decimal:
        """What sharing saved (or is to save) the period: alone less shared."""
        return self.alone_total - self.total

    @property
    def shares(self) -> bool:
        return bool(self.borrowed_gpu_hours or self.lent_gpu_hours or self.saving)


def of_statement(statement: Statement) -> Bill:
    """A period statement's own figures (corrections of other periods apart)."""
    s = statement
    lines = s.shared_lines
    borrowed = sum((x.gpu_hours for x in lines if x.kind == "borrowed"), ZERO)
    lent = sum((x.gpu_hours for x in lines if x.kind == "lent"), ZERO)
    alone = s.standalone_overage_cost if s.standalone_overage_cost is not None \
        else s.overage_cost
    return Bill(s.currency, s.committed_gpu_hours, s.allocated_gpu_hours, s.overage_gpu_hours,
                borrowed, lent, s.committed_cost, s.overage_cost, s.shared_cost,
                s.upfront_fee or ZERO, alone, s.committed_rate, stated=True, credit=s.credit)


def priced(terms: Terms, used: Decimal, shared: Shared | None, *, first: bool,
           credit: Decimal = ZERO) -> Bill:
    """What a statement of `used` GPU-hours under `terms` bills, after `shared` where the
    period is shared (the upfront fee on the first period), less its service `credit`."""
    cost = terms.cost(billing.gpu_hours(used))
    fee = billing.money(terms.upfront_fee, terms.currency) if first else ZERO
    if shared is None:
        return Bill(terms.currency, cost.committed_gpu_hours, cost.used_gpu_hours,
                    cost.overage_gpu_hours, ZERO, ZERO, cost.committed_cost, cost.overage_cost,
                    ZERO, fee, cost.overage_cost, terms.committed_rate, credit=credit)
    return Bill(terms.currency, cost.committed_gpu_hours, cost.used_gpu_hours,
                shared.overage_gpu_hours, shared.borrowed_gpu_hours, shared.lent_gpu_hours,
                cost.committed_cost, shared.overage_cost, shared.shared_cost, fee,
                shared.standalone_overage_cost, terms.committed_rate, credit=credit)


def of_entry(entry) -> Bill:
    """A ledger entry's bill: its statement once stated, else what closing it now bills."""
    if entry.statement is not None:
        return of_statement(entry.statement)
    return priced(entry.terms, entry.metered, entry.shared, first=entry.period.index == 0,
                  credit=entry.credit)


@dataclass(frozen=True)
class Whole:
    """The contract so far: every statement (fee and corrections included), the corrections
    pending for the next one, and the periods not stated yet at their usage so far."""

    currency: str
    stated: Decimal
    pending: Decimal
    unstated: Decimal
    bills: list[Bill]

    @property
    def total(self) -> Decimal:
        return self.stated + self.pending + self.unstated

    def _sum(self, name: str) -> Decimal:
        return sum((getattr(b, name) for b in self.bills), ZERO)

    @property
    def overage_gpu_hours(self) -> Decimal:
        return self._sum("overage_gpu_hours")

    @property
    def borrowed_gpu_hours(self) -> Decimal:
        return self._sum("borrowed_gpu_hours")

    @property
    def lent_gpu_hours(self) -> Decimal:
        return self._sum("lent_gpu_hours")

    @property
    def saving(self) -> Decimal:
        return self._sum("saving")

    @property
    def upfront_fee(self) -> Decimal:
        return self._sum("upfront_fee")


def whole(ledger) -> Whole:
    """The whole contract as its ledger (loans.services.ledger.read) bills it: each period's bill
    read once, in the order of its entries."""
    currency = ledger.contract.terms_for(0).currency
    read = [of_entry(e) for e in ledger.entries]
    unstated = sum((b.total for e, b in zip(ledger.entries, read, strict=True)
                    if e.statement is None), ZERO)
    return Whole(currency, ledger.billed_money, ledger.pending_amount, unstated, read)


def projected(contract_id: int, terms: Terms, period, used: Decimal, pool,
              credit: Decimal = ZERO) -> Bill:
    """An open period's end priced as its statement would bill it: `used` GPU-hours (the
    forecast's); in a sharing group (`pool`, loans.services.ledger.pooled's pool of the
    period), with the sharing run on every member's projected usage, this member's as the pool
    reads it; less the service `credit` its floor so far earns."""
    first = period.index == 0
    if pool is not None:
        glance = next((g for c, g in pool.members if c.pk == contract_id), None)
        if glance is not None and glance.period.index == period.index:
            return priced(terms, glance.projected_used_gpu_hours, pool.projected[contract_id],
                          first=first, credit=credit)
    return priced(terms, used, None, first=first, credit=credit)


def as_json(bill: Bill) -> dict:
    """A bill as the API writes it: money to the currency's minor unit, GPU-hours to the
    meter's 0.000001, as decimal strings; the words of the page (module docstring)."""
    hours = ("committed_gpu_hours", "used_gpu_hours", "past_commitment_gpu_hours",
             "overage_gpu_hours", "borrowed_gpu_hours", "lent_gpu_hours", "unused_gpu_hours")
    money = ("committed_cost", "overage_cost", "sharing_cost", "upfront_fee", "credit",
             "total", "alone_total", "saving", "unused_money")
    return {"stated": bill.stated,
            **{name: str(billing.gpu_hours(getattr(bill, name))) for name in hours},
            **{name: str(billing.money(getattr(bill, name), bill.currency)) for name in money}}
