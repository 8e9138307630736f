"""The burn-down band's start for a team without history of its own: the fleet's forecast
errors pooled (loans.maths.forecast.pooled), from every tenant's daily usage over the
calibration window, computed once a day and cached; the bench's PRIOR in a fleet too young to
pool."""

import dataclasses
from datetime import UTC, datetime, time

from django.core.cache import cache

from loans.maths import forecast
from metering import usage

CACHE_SECONDS = 26 * 3600


def fleet_prior(now: datetime) -> forecast.Spread:
    """The pooled spread of the fleet's teams up to today's UTC midnight."""
    midnight = datetime.combine(now.astimezone(UTC).date(), time(), UTC)
    key = f"gpuloans:forecast-prior:{midnight:%Y-%m-%d}"
    cached = cache.get(key)
    if isinstance(cached, dict):
        return forecast.Spread(**{**cached, "measured": tuple(cached.get("measured", ()))})
    teams = usage.daily_allocated(midnight - forecast.CALIBRATION, midnight)
    spread = forecast.pooled(list(teams.values())) or forecast.PRIOR
    cache.set(key, dataclasses.asdict(spread), CACHE_SECONDS)
    return spread
