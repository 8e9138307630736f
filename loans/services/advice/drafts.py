"""What every piece of advice starts from: the draft a recommendation is written from, the
tenant's hourly history, and the terms a change made now would replace. The standalone advice
(loans.services.advice.standalone) and the pooled one (loans.services.advice.pooled) both
read it."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from core.wording import Wording
from loans.maths.billing import Terms
from loans.models import Contract, Recommendation
from metering import usage
from metering.usage.series import tenant_series

HISTORY_DAYS = 183  # the term model's whole periods: about six months (bench/backtest.py)
Kind = Recommendation.Kind


@dataclass(frozen=True)
class Draft:
    kind: str
    current: str
    recommended: str
    wording: Wording
    expected_saving: Decimal | None = None
    confidence: str = ""
    lookback_days: int | None = None
    evidence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class History:
    allocated: list[float]
    busy: list[float]
    peaks: list[float]


def series_of(tenant_id: int, now: datetime, cache: dict | None = None):
    """The tenant's last HISTORY_DAYS by the hour (kept in `cache`, where given: a sharing
    group's teams read each other's)."""
    if cache is not None and tenant_id in cache:
        return cache[tenant_id]
    end = usage.floor_hour(now)
    found = tenant_series(tenant_id, end - timedelta(days=HISTORY_DAYS), end)
    if cache is not None:
        cache[tenant_id] = found
    return found


def history(contract: Contract, now: datetime, cache: dict | None = None) -> History:
    """The tenant's last HISTORY_DAYS by the hour, oldest first, from its first metered hour:
    hours before the meter saw it are no history, not idle time."""
    hours = series_of(contract.tenant_id, now, cache)
    first = next((k for k, n in enumerate(hours.counts) if n), len(hours.counts))
    return History(hours.allocated[first:], hours.busy[first:], hours.peaks[first:])


def periods_ahead(contract: Contract, now: datetime) -> tuple[int, bool]:
    """How many periods a commitment changed now would be held: the rest of the term after
    the current period (an amendment applies from the next), or a whole next term when this
    is the last period (a renewal). And whether it is the renewal."""
    current = contract.period_at(now)
    left = sum(1 for p in contract.periods() if current is not None and p.start >= current.end)
    return (left, False) if left else (contract.terms().term_months, True)


def terms_ahead(contract: Contract, now: datetime) -> Terms:
    """The terms a change made now would replace: those of the next period to begin (an
    amendment never applies to one that has begun), or, in the last period, its own."""
    ahead = next((p.index for p in contract.periods() if p.start > now), None)
    return contract.terms_at(now) if ahead is None else contract.terms_for(ahead)
