"""Sharing a commitment within a group (DESIGN "Sharing a commitment"): at a period's close,
unused committed GPU-hours of one contract cover the overage of another before any overage
rate applies. Borrowers in order of overage GPU-hours, largest first; lenders in order of
committed rate, lowest first; ties by contract id. A borrower borrows only from lenders whose
committed rate is below its own overage rate. The borrower pays the lender's committed rate for
each hour it borrows and the lender is credited the same amount, so what the group pays the
provider is the sum of the commitments plus the overage left after sharing, each at its
contract's own overage rate.

Why the rate check: every hour a borrower borrows replaces an hour it would have paid at its
overage rate by one at a lower rate, and every hour a lender lends is credited to it; so no
member's period costs more than it would alone (rounding each line to the minor unit aside),
and a contract whose Slurm budget held its use pays at most its commitment plus its budget.
Pure: plain numbers in, plain results out."""

from dataclasses import dataclass
from decimal import Decimal

from loans.maths.billing import Terms, gpu_hours, money, period_cost

ZERO = Decimal(0)


@dataclass(frozen=True)
class Member:
    """One contract's period in the group: its id, its terms and the GPU-hours it used."""

    contract_id: int
    terms: Terms
    used: Decimal


@dataclass(frozen=True)
class Transfer:
    lender: int
    borrower: int
    gpu_hours: Decimal
    rate: Decimal  # the lender's committed rate
    amount: Decimal  # gpu_hours x rate, to the currency's minor unit


@dataclass(frozen=True)
class Shared:
    """One contract's period after sharing."""

    contract_id: int
    overage_gpu_hours: Decimal  # left after borrowing, billed at its own overage rate
    overage_cost: Decimal
    borrowed: tuple[Transfer, ...]
    lent: tuple[Transfer, ...]
    standalone_overage_cost: Decimal  # what its overage would have cost alone

    @property
    def borrowed_amount(self) -> Decimal:
        return sum((t.amount for t in self.borrowed), ZERO)

    @property
    def lent_amount(self) -> Decimal:
        return sum((t.amount for t in self.lent), ZERO)

    @property
    def shared_cost(self) -> Decimal:
        """What sharing adds to its bill: paid for hours borrowed less credited for lent."""
        return self.borrowed_amount - self.lent_amount

    @property
    def saving(self) -> Decimal:
        """What sharing saved it: the overage it did not pay less what it paid to borrow,
        plus what it was credited for hours it would have left unused."""
        return self.standalone_overage_cost - self.overage_cost - self.shared_cost

    @property
    def borrowed_gpu_hours(self) -> Decimal:
        return sum((t.gpu_hours for t in self.borrowed), ZERO)

    @property
    def lent_gpu_hours(self) -> Decimal:
        return sum((t.gpu_hours for t in self.lent), ZERO)


@dataclass(frozen=True)
class Account:
    """One member as the rule reads it: what it committed, what it used, its two rates. Any
    number type (Decimals at the close, floats in the advice's thousands of windows)."""

    key: int
    committed: object
    used: object
    committed_rate: object
    overage_rate: object


def allocate(accounts: list[Account]) -> list[tuple[int, int, object]]:
    """The rule itself: (lender, borrower, GPU-hours) for every transfer, in the order made.
    The close (share) and the pooled advice (loans.maths.pooling) both call it."""
    overage = {a.key: a.used - a.committed for a in accounts if a.used > a.committed}
    unused = {a.key: a.committed - a.used for a in accounts if a.committed > a.used}
    if not overage or not unused:
        return []
    borrowers = sorted((a for a in accounts if a.key in overage),
                       key=lambda a: (-overage[a.key], a.key))
    lenders = sorted((a for a in accounts if a.key in unused),
                     key=lambda a: (a.committed_rate, a.key))
    out = []
    for borrower in borrowers:
        need = overage[borrower.key]
        for lender in lenders:
            # Lenders come cheapest first: from here on none is cheaper than going alone.
            if lender.committed_rate >= borrower.overage_rate:
                break
            room = unused[lender.key]
            if room <= 0:
                continue
            hours = need if need < room else room
            out.append((lender.key, borrower.key, hours))
            need -= hours
            unused[lender.key] = room - hours
            if need <= 0:
                break
    return out


def share(members: list[Member], currency: str) -> dict[int, Shared]:
    """Each member's period after the group's sharing, by contract id."""
    by_id = {m.contract_id: m for m in members}
    transfers = [Transfer(lender, borrower, hours, by_id[lender].terms.committed_rate,
                          money(hours * by_id[lender].terms.committed_rate, currency))
                 for lender, borrower, hours in allocate([
                     Account(m.contract_id, m.terms.committed_gpu_hours, gpu_hours(m.used),
                             m.terms.committed_rate, m.terms.overage_rate) for m in members])]
    out = {}
    for contract_id, m in by_id.items():
        alone = m.terms.cost(m.used)
        borrowed = tuple(t for t in transfers if t.borrower == contract_id)
        left = alone.overage_gpu_hours - sum((t.gpu_hours for t in borrowed), ZERO)
        out[contract_id] = Shared(
            contract_id=contract_id, overage_gpu_hours=left,
            overage_cost=money(left * m.terms.overage_rate, currency),
            borrowed=borrowed,
            lent=tuple(t for t in transfers if t.lender == contract_id),
            standalone_overage_cost=alone.overage_cost)
    return out


def provider_total(members: list[Member], shared: dict[int, Shared], currency: str) -> Decimal:
    """What the group pays the provider for the period: every commitment, plus the overage
    left after sharing at each contract's own overage rate."""
    committed = sum((period_cost(committed=m.terms.committed_gpu_hours, used=ZERO,
                                 committed_rate=m.terms.committed_rate,
                                 overage_rate=m.terms.overage_rate,
                                 currency=currency).committed_cost for m in members), ZERO)
    return committed + sum((s.overage_cost for s in shared.values()), ZERO)
