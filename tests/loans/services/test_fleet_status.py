"""The fleet page reads two sums a contract (its period so far and the trailing week), not
every hour; what it shows must be what the tenant page and the ledger show. Checked over random
fleets against a brute-force model written here from the hour rows themselves:

- used and busy GPU-hours are those of the hours that start inside the period and before now;
- the projection is used + (trailing week's GPU-hours / its hours) x the hours left, the
  week cut at the contract's first day;
- the tenant page's figures (the burn-down from every hour) agree to the GPU-hours' last place.
"""

from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loans.models import Contract, Plan, Tenant
from loans.services.fleet_status import contract_statuses
from loans.services.ledger import dashboard
from loans.services.ledger import read as ledgers
from metering.models import TenantHour
from tests.ledger import midnight, months_later
from tests.tiers import examples

D = Decimal
HOUR = timedelta(hours=1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ZONES = ["UTC", "Asia/Shanghai", "Europe/Berlin", "America/New_York"]
QUANTUM = D("0.000001")


def gpu_hours(seconds: float) -> Decimal:
    return D(repr(seconds / 3600)).quantize(QUANTUM, ROUND_HALF_UP)


def model_period(starts_on: date, zone: str, term: int, now: datetime):
    """The period [start, end) of the contract that holds `now`, and the contract's first
    instant; None past its end."""
    for k in range(term):
        start = midnight(months_later(starts_on, k), zone)
        end = midnight(months_later(starts_on, k + 1), zone)
        if start <= now < end:
            return start, end, midnight(starts_on, zone)
    return None


def model_figures(rows: dict[datetime, tuple[int, int]], start, end, first, now):
    """(used, busy, projected) GPU-hours from the hour rows, from first principles."""
    seen = min(now, end)
    used = sum(a for hour, (a, _b) in rows.items() if start <= hour < seen)
    busy = sum(b for hour, (_a, b) in rows.items() if start <= hour < seen)
    week_start = max(seen - timedelta(days=7), first)
    window = (seen - week_start).total_seconds() / 3600
    week = sum(a for hour, (a, _b) in rows.items() if week_start <= hour < seen)
    rate = week / 3600 / window if window > 0 else 0.0
    left = max(0.0, (end - max(now, start)).total_seconds() / 3600)
    projected = max(gpu_hours(used), D(repr(used / 3600 + rate * left)).quantize(
        QUANTUM, ROUND_HALF_UP))
    return gpu_hours(used), gpu_hours(busy), projected


# A tenant's hour rows: whole GPU-seconds (sums exact in any order), in hours from T0.
hour_rows = st.dictionaries(st.integers(0, 24 * 100), st.tuples(
    st.integers(0, 4 * 3600), st.integers(0, 100)), max_size=60)
fleets = st.lists(st.tuples(st.sampled_from(ZONES), st.integers(0, 40), st.integers(1, 3),
                            hour_rows), min_size=1, max_size=4)


@pytest.mark.django_db
@settings(max_examples=examples(60), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fleet=fleets, now_hours=st.integers(0, 24 * 100), now_minutes=st.integers(0, 59))
def test_the_fleet_shows_what_the_hours_and_the_tenant_page_say(fleet, now_hours, now_minutes):
    now = T0 + timedelta(hours=now_hours, minutes=now_minutes)
    with transaction.atomic():
        plan = Plan.objects.create(name="P", base_quota_gpus=1, max_quota_gpus=2,
                                   committed_gpu_hours=D(300), committed_rate=D(10),
                                   overage_rate=D(12), currency="CNY")
        expected = {}
        for k, (zone, start_day, term, rows) in enumerate(fleet):
            tenant = Tenant.objects.create(slug=f"team-{k}", name=f"Team {k}")
            starts_on = date(2026, 1, 1) + timedelta(days=start_day)
            contract = Contract(tenant=tenant, plan=plan, starts_on=starts_on, time_zone=zone,
                                term_months=term, status=Contract.Status.ACTIVE)
            contract.full_clean()
            contract.save()
            stored = {T0 + h * HOUR: (a, a * util // 100) for h, (a, util) in rows.items()}
            TenantHour.objects.bulk_create(
                TenantHour(tenant=tenant, hour=hour, allocated_gpu_s=a, busy_gpu_s=b,
                           sample_count=1, peak_gpus=1) for hour, (a, b) in stored.items())
            period = model_period(starts_on, zone, term, now)
            if period is not None:
                expected[contract.pk] = (period, model_figures(stored, *period, now))

        statuses = {s.contract.pk: s for s in contract_statuses(now)}
        assert set(statuses) == set(expected)
        for pk, ((start, end, _first), (used, busy, projected)) in expected.items():
            glance = statuses[pk].figures
            assert (glance.period.start, glance.period.end) == (start, end)
            assert glance.used_gpu_hours == used
            assert glance.busy_gpu_hours == busy
            assert abs(glance.projected_used_gpu_hours - projected) <= QUANTUM

            contract = statuses[pk].contract
            full = dashboard.figures(contract, glance.period, now)
            assert full.used_gpu_hours == glance.used_gpu_hours
            assert full.busy_gpu_hours == glance.busy_gpu_hours
            assert full.cost_so_far == glance.cost_so_far
            assert abs(full.projected_used_gpu_hours - glance.projected_used_gpu_hours) <= QUANTUM
            assert abs(full.projected_cost.total - glance.projected_cost.total) <= D("0.01")
            assert full.days_left == glance.days_left
            entry = ledgers.period_entry(contract, glance.period, now)
            assert ledgers.period_entries([(contract, glance.period)], now)[pk] == entry
        transaction.set_rollback(True)

