"""usage.series.tenant_series: the same hours as usage.tenant_hours, as plain lists, on both
databases (its SQL is each database's own)."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering import usage
from metering.models import TenantHour
from metering.usage.series import tenant_series
from tests.tiers import examples

START = datetime(2026, 10, 31, 16, 0, tzinfo=UTC)


@pytest.mark.django_db
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.dictionaries(st.integers(0, 200), st.tuples(
           st.floats(0, 36_000), st.floats(0, 36_000), st.floats(0, 10), st.integers(0, 40)),
           max_size=60),
       skew=st.integers(0, 3599), span=st.integers(1, 220))
def test_the_series_holds_every_hour_as_tenant_hours_does(tenant, rows, skew, span):
    TenantHour.objects.filter(tenant=tenant).delete()
    TenantHour.objects.bulk_create(
        TenantHour(tenant=tenant, hour=START + timedelta(hours=k), allocated_gpu_s=a,
                   busy_gpu_s=b, peak_gpus=p, sample_count=n)
        for k, (a, b, p, n) in rows.items())
    start = START + timedelta(seconds=skew)  # mid-hour: from the hour it falls in
    end = START + timedelta(hours=span, seconds=skew // 2)
    hours = usage.tenant_hours(tenant.pk, start, end)
    series = tenant_series(tenant.pk, start, end)
    assert series.start == hours[0].hour if hours else True
    assert series.allocated == pytest.approx([h.allocated_gpu_hours for h in hours])
    assert series.busy == pytest.approx([h.busy_gpu_hours for h in hours])
    assert series.peaks == [h.peak_gpus for h in hours]
    assert series.counts == [h.sample_count for h in hours]
