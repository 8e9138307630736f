"""Buying GPUs against a GPU loan (a contract or a catalogue plan). Pure: Decimals in and out.

Owning N GPUs costs, each year, the straight-line depreciation of their price, their server
and facility overhead, and maintenance as a share of the price, whatever they do. A loan costs
C * r_c a period plus the overage rate on what goes beyond C. At utilisation u the same N GPUs
do N * 730 * u GPU-hours a month; the cheaper option per used GPU-hour, and the utilisation
at which the two cost the same, follow.
"""

from dataclasses import dataclass
from decimal import Decimal

from loans.maths.billing import money, period_cost

HOURS_PER_YEAR = Decimal(8760)
HOURS_PER_MONTH = HOURS_PER_YEAR / 12
GPU_HOUR_PRICE = Decimal("0.0001")


@dataclass(frozen=True)
class Purchase:
    gpus: int
    price_per_gpu: Decimal
    overhead_per_gpu_year: Decimal
    maintenance_share: Decimal  # of the price, per year
    depreciation_years: int

    def yearly_cost(self) -> Decimal:
        per_gpu = (self.price_per_gpu / self.depreciation_years + self.overhead_per_gpu_year
                   + self.maintenance_share * self.price_per_gpu)
        return per_gpu * self.gpus

    def cash_by_month(self, months: int) -> list[Decimal]:
        """Cumulative cash: the purchase up front, then overhead and maintenance monthly."""
        running = (self.overhead_per_gpu_year + self.maintenance_share * self.price_per_gpu) \
            * self.gpus / 12
        upfront = self.price_per_gpu * self.gpus
        return [money(upfront + running * m) for m in range(months + 1)]


@dataclass(frozen=True)
class Loan:
    name: str
    committed_gpu_hours: Decimal  # per period (month)
    committed_rate: Decimal
    overage_rate: Decimal
    upfront_fee: Decimal = Decimal(0)

    def monthly_cost(self, used: Decimal) -> Decimal:
        return period_cost(committed=self.committed_gpu_hours, used=used,
                           committed_rate=self.committed_rate,
                           overage_rate=self.overage_rate).total

    def cash_by_month(self, months: int, used: Decimal) -> list[Decimal]:
        monthly = self.monthly_cost(used)
        return [money(self.upfront_fee + monthly * m) for m in range(months + 1)]


@dataclass(frozen=True)
class Comparison:
    used_gpu_hours_per_month: Decimal
    buy_per_used_gpu_hour: Decimal | None
    loan_per_used_gpu_hour: Decimal | None
    buy_per_year: Decimal
    loan_per_year: Decimal
    break_even_utilisation: Decimal | None  # None: buying never pays up to 100%
    cheaper: str  # "buy" or "loan"
    months: list[int]
    buy_cumulative: list[Decimal]
    loan_cumulative: list[Decimal]


def break_even(purchase: Purchase, loan: Loan) -> Decimal | None:
    """The utilisation from which owning the GPUs costs no more than the loan (0 when owning
    is cheaper even idle; None when the loan stays cheaper at 100%)."""
    buy_month = purchase.yearly_cost() / 12
    base = loan.committed_gpu_hours * loan.committed_rate
    if buy_month <= base:
        return Decimal(0)
    if loan.overage_rate <= 0:
        return None
    # The loan costs `base` up to C GPU-hours, then rises at r_o.
    used = loan.committed_gpu_hours + (buy_month - base) / loan.overage_rate
    share = used / (purchase.gpus * HOURS_PER_MONTH)
    return share.quantize(Decimal("0.0001")) if share <= 1 else None


def compare(purchase: Purchase, loan: Loan, utilisation: Decimal, months: int) -> Comparison:
    used = (purchase.gpus * HOURS_PER_MONTH * utilisation).quantize(Decimal("0.000001"))
    buy_year = money(purchase.yearly_cost())
    loan_year = loan.monthly_cost(used) * 12
    per_used_buy = per_used_loan = None
    if used > 0:
        per_used_buy = (buy_year / (used * 12)).quantize(GPU_HOUR_PRICE)
        per_used_loan = (loan.monthly_cost(used) / used).quantize(GPU_HOUR_PRICE)
    return Comparison(
        used_gpu_hours_per_month=used,
        buy_per_used_gpu_hour=per_used_buy,
        loan_per_used_gpu_hour=per_used_loan,
        buy_per_year=buy_year,
        loan_per_year=loan_year,
        break_even_utilisation=break_even(purchase, loan),
        cheaper="buy" if buy_year < loan_year else "loan",
        months=list(range(months + 1)),
        buy_cumulative=purchase.cash_by_month(months),
        loan_cumulative=loan.cash_by_month(months, used),
    )
