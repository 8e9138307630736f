"""The band's calibration and its coverage come from the fleet's own days: the pool counts a
tenant from its first metered hour, the coverage is measured by a daily job and stored, and
the page says what was stored (or that the fleet is too young to say)."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.core.management import call_command

from loans.maths import forecast
from loans.models import BandCoverage, Tenant
from loans.services.ledger.forecasting import fleet_prior, measure_coverage, measured_coverage
from metering.models import TenantHour
from tests.story import NOW

MIDNIGHT = datetime(2026, 12, 4, tzinfo=UTC)


def meter(days_by_tenant: dict[str, list[float]], end: datetime = MIDNIGHT) -> None:
    """Each tenant's daily GPU-hours, the last day ending at `end`, spread over the hours
    (days of 0 write no rows: nothing was metered)."""
    rows = []
    for slug, days in days_by_tenant.items():
        tenant = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.title()})[0]
        for k, value in enumerate(days):
            day = end - timedelta(days=len(days) - k)
            rows += [TenantHour(tenant=tenant, hour=day + timedelta(hours=h),
                                allocated_gpu_s=value * 3600 / 24, busy_gpu_s=0, peak_gpus=1,
                                sample_count=1) for h in range(24) if value]
    TenantHour.objects.bulk_create(rows)


def test_the_fleet_band_is_pooled_from_first_metered_days_once_a_day(
        db, django_assert_num_queries):
    rng = random.Random(8)
    young = {f"t{k}": [rng.gauss(100, 25) for _ in range(20)] for k in range(forecast.MIN_TEAMS)}
    meter(young)
    cache.clear()
    spread = fleet_prior(MIDNIGHT + timedelta(hours=9))
    # The 36 days of the window before they were metered are not weeks of idling.
    want = forecast.pooled(list(young.values()))
    assert spread.own and spread.low == pytest.approx(want.low)
    assert spread.high == pytest.approx(want.high)
    with django_assert_num_queries(0):  # cached for the day
        assert fleet_prior(MIDNIGHT + timedelta(hours=12)) == spread


def test_a_fleet_too_young_to_pool_gets_the_benchs_prior(db):
    meter({"solo": [50.0] * 30})
    cache.clear()
    assert fleet_prior(MIDNIGHT) == forecast.PRIOR


def test_the_daily_job_stores_the_coverage_the_backtest_measures(db, capsys,
                                                                 django_assert_num_queries):
    rng = random.Random(3)
    fleet = {f"t{k}": [max(0.0, rng.gauss(100, 30)) for _ in range(84)] for k in range(4)}
    meter(fleet)
    cache.clear()
    assert measured_coverage() == {}
    found = measure_coverage(MIDNIGHT + timedelta(hours=1))
    assert found == forecast.backtest(list(fleet.values()))
    stored = {row.bucket: (row.inside, row.forecasts) for row in BandCoverage.objects.all()}
    assert stored == {b: (c.inside, c.forecasts) for b, c in found.items()}
    assert all(c.forecasts >= forecast.MIN_FORECASTS for c in found.values())
    assert measured_coverage() == found
    with django_assert_num_queries(0):  # the job pooled the day's band: no page pays for it
        assert fleet_prior(MIDNIGHT + timedelta(hours=2)).own
    measure_coverage(MIDNIGHT + timedelta(hours=5))  # the same day again: replaced
    assert BandCoverage.objects.count() == 3
    call_command("measure_band_coverage")
    assert capsys.readouterr().out.count("days left:") == 3


def test_the_page_says_how_often_the_band_held_on_this_fleet(client, lead, contract, metered):
    """A fleet where the band held 60% of 200 forecasts at this many days left says 6 in 10
    on 200 forecasts; under 50 forecasts it says the fleet is too young to measure."""
    left = forecast.bucket((contract.periods()[1].end - NOW).total_seconds() / 86400)
    BandCoverage.objects.create(measured_on=NOW.date(), bucket=left, inside=120, forecasts=200)
    cache.clear()
    client.force_login(lead)
    html = client.get("/en/tenants/vision/").content.decode()
    assert ("On this fleet's past 200 forecasts at as many days left, the outcome fell inside "
            "such a range 6 times in 10") in html
    band = client.get(f"/api/v1/contracts/{contract.pk}/burndown").json()["projected"]["band"]
    assert band["coverage"] == 0.6 and band["coverage_forecasts"] == 200
    BandCoverage.objects.create(measured_on=NOW.date() + timedelta(days=1), bucket=left,
                                inside=30, forecasts=40)
    cache.clear()
    html = client.get("/en/tenants/vision/").content.decode()
    assert "The fleet is too young to measure how often such a range holds" in html
    assert client.get(f"/api/v1/contracts/{contract.pk}/burndown").json()[
        "projected"]["band"]["coverage"] is None
