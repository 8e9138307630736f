"""Sharing a commitment within a group (DESIGN "Sharing a commitment"): at a period's close,
unused committed GPU-hours of one contract cover the overage of another before any overage
rate applies. Borrowers in order of overage GPU-hours, largest first; lenders in order of
committed rate, lowest first; ties by contract id. The borrower pays the lender's committed
rate for each hour it borrows and the lender is credited the same amount, so what the group
pays the provider is the sum of the commitments plus the overage left after sharing, each at
its contract's own overage rate. Pure: plain numbers in, plain results out."""

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


def share(members: list[Member], currency: str) -> dict[int, Shared]:
    """Each member's period after the group's sharing, by contract id."""
    unused, overage = {}, {}
    for m in members:
        cost = m.terms.cost(m.used)
        unused[m.contract_id] = cost.unused_gpu_hours
        overage[m.contract_id] = cost.overage_gpu_hours
    by_id = {m.contract_id: m for m in members}
    borrowers = sorted((m for m in members if overage[m.contract_id] > 0),
                       key=lambda m: (-overage[m.contract_id], m.contract_id))
    lenders = sorted((m for m in members if unused[m.contract_id] > 0),
                     key=lambda m: (m.terms.committed_rate, m.contract_id))
    transfers = []
    for borrower in borrowers:
        for lender in lenders:
            need, room = overage[borrower.contract_id], unused[lender.contract_id]
            if need <= 0:
                break
            if room <= 0:
                continue
            hours = gpu_hours(min(need, room))
            rate = lender.terms.committed_rate
            transfers.append(Transfer(lender.contract_id, borrower.contract_id, hours, rate,
                                      money(hours * rate, currency)))
            overage[borrower.contract_id] -= hours
            unused[lender.contract_id] -= hours
    out = {}
    for contract_id, m in by_id.items():
        left = overage[contract_id]
        out[contract_id] = Shared(
            contract_id=contract_id, overage_gpu_hours=left,
            overage_cost=money(left * m.terms.overage_rate, currency),
            borrowed=tuple(t for t in transfers if t.borrower == contract_id),
            lent=tuple(t for t in transfers if t.lender == contract_id),
            standalone_overage_cost=m.terms.cost(m.used).overage_cost)
    return out


def provider_total(members: list[Member], shared: dict[int, Shared], currency: str) -> Decimal:
    """What the group pays the provider for the period: every commitment, plus the overage
    left after sharing at each contract's own overage rate."""
    committed = sum((period_cost(committed=m.terms.committed_gpu_hours, used=ZERO,
                                 committed_rate=m.terms.committed_rate,
                                 overage_rate=m.terms.overage_rate,
                                 currency=currency).committed_cost for m in members), ZERO)
    return committed + sum((s.overage_cost for s in shared.values()), ZERO)
