"""What to sign first, from a history of usage and no contract (the sources' first step: run on
demand a month or two, collect the usage, then commit a moderate amount): the on-demand cost,
each offered plan at the commitment that suits its prices best, each with P10/P50/P90 of its
total over a term, and the cheapest at the median as the advice.

The commitment for a plan is the newsvendor quantile (loans.maths.recommend) of period-long
windows of the history. A term's total is uncertain in the usage of each of its periods, and
the windows, a day apart, overlap: so the totals are drawn by block bootstrap, a term's worth
of whole periods drawn from the history's windows, the same seeded draws for every option."""

import random
import statistics
from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal

from django.utils.translation import gettext as _

from loans.maths import recommend
from loans.maths.billing import Terms, money, period_cost
from loans.models import Plan
from loans.services.advice.history import History, HistoryError
from metering.usage import slurm

PERIOD_HOURS = 730  # a month, as the advice reads periods (loans.services.advice.standalone)
DRAWS = 1000
SEED = 20261201
ON_DEMAND = "on demand"


class NoOnDemandPrice(HistoryError):
    """No offered plan without a commitment gives the on-demand price, and none was given: the
    caller says where to give it (the command's option, the page's field)."""


@dataclass(frozen=True)
class Option:
    name: str
    commitment: Decimal  # GPU-hours a period; 0 on demand
    committed_rate: Decimal
    overage_rate: Decimal
    upfront_fee: Decimal
    max_quota_gpus: int | None
    fits_peak: bool
    p10: Decimal
    p50: Decimal
    p90: Decimal
    current: bool = False  # the tenant's contract as it stands, renewed on its own terms


@dataclass(frozen=True)
class FirstAdvice:
    history_start: str
    history_end: str
    history_hours: int
    source: str
    skipped: list[str]
    currency: str
    term_months: int
    period_hours: int
    mean_gpus: float
    peak_gpus: float
    period_usage_p10: float
    period_usage_p50: float
    period_usage_p90: float
    on_demand: Option
    plans: list[Option]
    advised: str  # the option's name
    # Where the on-demand price came from: "given", "plan" (an offered plan without a
    # commitment) or "catalogue" (no such plan: the highest overage rate offered, said so).
    on_demand_from: str = "given"

    def as_json(self) -> dict:
        def plain(value):
            if isinstance(value, Decimal):
                return str(value)
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value
        return plain(asdict(self))


def term_totals(windows: list[float], months: int, commitment: Decimal, committed_rate: Decimal,
                overage_rate: Decimal, fee: Decimal, currency: str
                ) -> tuple[Decimal, Decimal, Decimal]:
    """P10, P50 and P90 of the total over `months` periods, each period's usage drawn from
    the windows (the same seeded draws whatever the option)."""
    rng = random.Random(SEED)  # noqa: S311 - a seeded bootstrap, not a secret
    costs = {}
    totals = []
    for _draw in range(DRAWS):
        total = fee
        for used in rng.choices(windows, k=months):
            if used not in costs:
                costs[used] = period_cost(committed=commitment, used=Decimal(repr(used)),
                                          committed_rate=committed_rate,
                                          overage_rate=overage_rate, currency=currency).total
            total += costs[used]
        totals.append(float(total))
    return tuple(money(Decimal(repr(recommend.quantile(totals, q))), currency)
                 for q in (0.1, 0.5, 0.9))


def slurm_history(tenant_id: int, now: datetime) -> History:
    """The tenant's usage by Slurm's accounting, as imported (import_slurm_usage), or
    HistoryError where there is none."""
    start, hours = slurm.tenant_hours(tenant_id, now)
    if start is None:
        raise HistoryError([_("Slurm accounting holds no job of this tenant's accounts: "
                              "import it (import_slurm_usage) or give a history file")])
    return History(start, hours, "slurm accounting")


def advise(history: History, *, term_months: int, currency: str,
           on_demand_rate: Decimal | None = None, current: tuple[str, Terms] | None = None
           ) -> FirstAdvice:
    """Each offered plan at the commitment that suits its prices, on demand, and (`current`:
    a name and the terms of the tenant's contract in force) the contract as it stands, each
    priced over a whole term from the history's month-long windows."""
    hours = history.hours
    if len(hours) < PERIOD_HOURS:
        raise HistoryError([_("the history holds %(hours)s hours; at least a period "
                              "(%(period)s hours, a month) is needed to advise")
                            % {"hours": f"{len(hours):,}", "period": PERIOD_HOURS}])
    windows = recommend.period_windows(hours, PERIOD_HOURS, len(hours) // 24)
    peak = max(hours)
    plans = list(Plan.objects.filter(is_offered=True, currency=currency).order_by("name"))
    free = next((p for p in plans if p.committed_gpu_hours == 0), None)
    if on_demand_rate is not None:
        rate, source = on_demand_rate, "given"
    elif free is not None:
        rate, source = free.effective_overage_rate(), "plan"
    elif plans:  # what using GPUs past any commitment costs here: the dearest overage rate
        rate, source = max(p.effective_overage_rate() for p in plans), "catalogue"
    else:
        raise NoOnDemandPrice([_("no %(currency)s plan is offered to price the on-demand "
                                 "use") % {"currency": currency}])
    on_demand = Option(ON_DEMAND, Decimal(0), Decimal(0), rate, Decimal(0), None, True,
                       *term_totals(windows, term_months, Decimal(0), Decimal(0), rate,
                                    Decimal(0), currency))
    options = []
    for plan in plans:
        if plan is free:
            continue
        overage = plan.effective_overage_rate()
        best = recommend.newsvendor(windows, plan.committed_rate, overage)
        commitment = min(recommend.whole(best), Decimal(plan.max_quota_gpus * PERIOD_HOURS))
        options.append(Option(
            plan.name, commitment, plan.committed_rate, overage, plan.upfront_fee,
            plan.max_quota_gpus, plan.max_quota_gpus >= peak,
            *term_totals(windows, term_months, commitment, plan.committed_rate, overage,
                         plan.upfront_fee, currency)))
    if current is not None and current[1].currency == currency:
        name, terms = current
        options.insert(0, Option(
            name, terms.committed_gpu_hours, terms.committed_rate, terms.overage_rate,
            terms.upfront_fee, terms.max_quota_gpus, terms.max_quota_gpus >= peak,
            *term_totals(windows, term_months, terms.committed_gpu_hours, terms.committed_rate,
                         terms.overage_rate, terms.upfront_fee, currency), current=True))
    fitting = [o for o in [on_demand, *options] if o.fits_peak]
    advised = min(fitting, key=lambda o: (o.p50, o.p90))
    return FirstAdvice(
        history_start=history.start.isoformat(), history_end=history.end.isoformat(),
        history_hours=len(hours), source=history.source, skipped=history.skipped,
        currency=currency, term_months=term_months, period_hours=PERIOD_HOURS,
        mean_gpus=round(statistics.fmean(hours), 2), peak_gpus=round(peak, 2),
        period_usage_p10=round(recommend.quantile(windows, 0.1), 1),
        period_usage_p50=round(recommend.quantile(windows, 0.5), 1),
        period_usage_p90=round(recommend.quantile(windows, 0.9), 1),
        on_demand=on_demand, plans=options, advised=advised.name, on_demand_from=source)

