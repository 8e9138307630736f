"""Buying GPUs against a GPU loan (a contract or a catalogue plan). Pure: Decimals in and out.

One question, over one horizon of N months: which costs less? Buying N GPUs costs what the GPUs
lose in value over the months (their price written off in a straight line over the depreciation
years; what is left at the end is still the owner's) plus their server and facility overhead
and maintenance (a share of the price a year), whatever they do. A loan costs its upfront fee,
then C * r_c a month plus the overage rate on what goes beyond C. At utilisation u the same N
GPUs do N * 730 * u GPU-hours a month. The verdict, the cost per used GPU-hour, the break-even
utilisation and the chart all read these two costs over the same N months; the cash buying
needs up front and the value left at the end are shown beside them.
"""

from dataclasses import dataclass
from decimal import Decimal

from loans.maths.billing import money, period_cost

HOURS_PER_YEAR = Decimal(8760)
HOURS_PER_MONTH = HOURS_PER_YEAR / 12
GPU_HOUR_PRICE = Decimal("0.0001")
SHARE = Decimal("0.0001")


@dataclass(frozen=True)
class Purchase:
    gpus: int
    price_per_gpu: Decimal
    overhead_per_gpu_year: Decimal
    maintenance_share: Decimal  # of the price, per year
    depreciation_years: int

    @property
    def price(self) -> Decimal:
        """The cash up front."""
        return self.price_per_gpu * self.gpus

    def running_per_month(self) -> Decimal:
        return (self.overhead_per_gpu_year + self.maintenance_share * self.price_per_gpu) \
            * self.gpus / 12

    def written_off(self, months: int) -> Decimal:
        """What the GPUs have lost in value after `months` (never more than their price)."""
        return min(self.price, self.price * months / (self.depreciation_years * 12))

    def value_left(self, months: int, currency: str) -> Decimal:
        return money(self.price - self.written_off(months), currency)

    def cost_by_month(self, months: int, currency: str) -> list[Decimal]:
        """Cumulative cost of owning them: value written off plus running costs."""
        running = self.running_per_month()
        return [money(self.written_off(m) + running * m, currency) for m in range(months + 1)]


@dataclass(frozen=True)
class Loan:
    name: str
    committed_gpu_hours: Decimal  # per period (month)
    committed_rate: Decimal
    overage_rate: Decimal
    upfront_fee: Decimal = Decimal(0)

    def monthly_cost(self, used: Decimal, currency: str) -> Decimal:
        return period_cost(committed=self.committed_gpu_hours, used=used,
                           committed_rate=self.committed_rate,
                           overage_rate=self.overage_rate, currency=currency).total

    def cost_by_month(self, months: int, used: Decimal, currency: str) -> list[Decimal]:
        """Cumulative cost: the upfront fee, then each month's bill."""
        monthly = self.monthly_cost(used, currency)
        return [money(self.upfront_fee + monthly * m, currency) for m in range(months + 1)]


@dataclass(frozen=True)
class Comparison:
    months: int  # the horizon every figure below is over
    used_gpu_hours_per_month: Decimal
    buy_total: Decimal
    loan_total: Decimal
    buy_per_used_gpu_hour: Decimal | None
    loan_per_used_gpu_hour: Decimal | None
    break_even_utilisation: Decimal | None  # None: the loan costs less even at 100%
    cheaper: str  # "buy" or "loan"
    cash_up_front: Decimal
    value_left: Decimal
    month: list[int]
    buy_cumulative: list[Decimal]
    loan_cumulative: list[Decimal]


def used_per_month(gpus: int, utilisation: Decimal) -> Decimal:
    return (gpus * HOURS_PER_MONTH * utilisation).quantize(Decimal("0.000001"))


def break_even(purchase: Purchase, loan: Loan, months: int, currency: str) -> Decimal | None:
    """The utilisation from which owning the GPUs costs no more than the loan over `months`
    (0 when owning costs less even idle; None when the loan costs less even at 100%)."""
    buy = purchase.cost_by_month(months, currency)[-1]
    idle = loan.upfront_fee + months * loan.committed_gpu_hours * loan.committed_rate
    if buy <= idle:
        return Decimal(0)
    if loan.overage_rate <= 0:
        return None
    # The loan costs `idle` up to C GPU-hours a month, then rises at r_o for each beyond.
    used = loan.committed_gpu_hours + (buy - idle) / (months * loan.overage_rate)
    share = used / (purchase.gpus * HOURS_PER_MONTH)
    if share > 1:
        return None
    # Rounded up: at the utilisation shown, buying costs no more than the loan.
    return share.quantize(SHARE, rounding="ROUND_CEILING")


def compare(purchase: Purchase, loan: Loan, utilisation: Decimal, months: int, *,
            currency: str) -> Comparison:
    """Both over `months`, in `currency` (both priced in it, rounded to its minor unit)."""
    used = used_per_month(purchase.gpus, utilisation)
    buy = purchase.cost_by_month(months, currency)
    lent = loan.cost_by_month(months, used, currency)
    per_used_buy = per_used_loan = None
    if used > 0:
        per_used_buy = (buy[-1] / (used * months)).quantize(GPU_HOUR_PRICE)
        per_used_loan = (lent[-1] / (used * months)).quantize(GPU_HOUR_PRICE)
    return Comparison(
        months=months,
        used_gpu_hours_per_month=used,
        buy_total=buy[-1],
        loan_total=lent[-1],
        buy_per_used_gpu_hour=per_used_buy,
        loan_per_used_gpu_hour=per_used_loan,
        break_even_utilisation=break_even(purchase, loan, months, currency),
        cheaper="buy" if buy[-1] < lent[-1] else "loan",
        cash_up_front=money(purchase.price, currency),
        value_left=purchase.value_left(months, currency),
        month=list(range(months + 1)),
        buy_cumulative=buy,
        loan_cumulative=lent,
    )
