"""The burn-down band's calibration and its coverage, both from the fleet's own days: the
fleet's forecast errors pooled (loans.maths.forecast.pooled) from every tenant's daily usage
over the calibration window, each from its first metered day, computed once a day and cached
(the bench's PRIOR where the fleet is too young); and how often that band held the outcome
over the last weeks' rolling origins (loans.maths.forecast.backtest), measured by a daily job
and stored, so a page states a coverage this fleet measured, and how many forecasts it rests
on."""

from datetime import UTC, datetime, time, timedelta

from django.core.cache import cache
from django.db import transaction
from django.db.models import Subquery

from loans.maths import forecast
from loans.models import BandCoverage
from metering import usage

CACHE_SECONDS = 26 * 3600
COVERAGE_KEY = "gpuloans:band-coverage"


def _midnight(now: datetime) -> datetime:
    return datetime.combine(now.astimezone(UTC).date(), time(), UTC)


def fleet_prior(now: datetime) -> forecast.Spread:
    """The pooled band of the fleet's teams up to today's UTC midnight."""
    midnight = _midnight(now)
    key = f"gpuloans:forecast-band:{midnight:%Y-%m-%d}"
    cached = cache.get(key)
    if isinstance(cached, dict):
        return forecast.Spread(tuple(cached["low"]), tuple(cached["high"]), cached["scale"],
                               cached["source"])
    teams = usage.daily_allocated(midnight - forecast.CALIBRATION, midnight)
    spread = forecast.pooled(list(teams.values()))
    cache.set(key, {"low": list(spread.low), "high": list(spread.high), "scale": spread.scale,
                    "source": spread.source}, CACHE_SECONDS)
    return spread


def measure_coverage(now: datetime) -> dict[str, forecast.Coverage]:
    """Measure the band's coverage on the fleet's last forecast.CHECKED days of rolling
    origins, and store it for today (a second run the same day replaces it); the day's fleet
    band is pooled and cached on the way."""
    midnight = _midnight(now)
    teams = usage.daily_allocated(
        midnight - forecast.CALIBRATION - timedelta(days=forecast.CHECKED), midnight)
    measured = forecast.backtest(list(teams.values()))
    with transaction.atomic():
        for bucket, found in measured.items():
            BandCoverage.objects.update_or_create(
                measured_on=midnight.date(), bucket=bucket,
                defaults={"inside": found.inside, "forecasts": found.forecasts})
    cache.delete(COVERAGE_KEY)
    fleet_prior(now)  # the day's band, pooled here rather than at the day's first page view
    return measured


def measured_coverage() -> dict[str, forecast.Coverage]:
    """The latest stored coverage of each bucket (empty before the job first ran), cached
    until the job measures it again."""
    cached = cache.get(COVERAGE_KEY)
    if isinstance(cached, dict):
        return {bucket: forecast.Coverage(*cell) for bucket, cell in cached.items()}
    latest = BandCoverage.objects.order_by("-measured_on").values("measured_on")[:1]
    found = {row.bucket: forecast.Coverage(row.inside, row.forecasts)
             for row in BandCoverage.objects.filter(measured_on=Subquery(latest))}
    cache.set(COVERAGE_KEY, {b: [c.inside, c.forecasts] for b, c in found.items()},
              CACHE_SECONDS)
    return found
