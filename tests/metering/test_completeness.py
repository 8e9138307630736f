"""Completeness (metering.usage.fleet.tenant_coverage_in), held to a model of the rule written
here from the rows themselves, hour by hour, over random fleets and periods:

- the devices expected in a period are every GPU, seen before the period's end, of the nodes
  that carried the tenant's usage in it or default to it;
- each is expected from its first sighting (or the period's start), except that those first
  heard in the hour of the period's earliest report are expected from its start: the silence
  before is missed data, not a device not yet there;
- a device's reported seconds are those of every hour row from the hour the period starts in
  to its end, whichever tenant the row is of, never more than it was expected;
- the share is reported over expected (1 where nothing is expected), and data is "from" the
  earliest report where that came after the period's start.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loans.models import Tenant
from metering.models import Gpu, GpuHour, Node
from metering.usage.fleet import tenant_coverage_in
from tests.tiers import examples

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
SPAN_HOURS = 96


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


# A GPU: minutes after T0 it was first seen, and its hour rows: hour -> (ours, reported s).
gpus = st.tuples(st.integers(0, SPAN_HOURS * 60),
                 st.dictionaries(st.integers(0, SPAN_HOURS - 1),
                                 st.tuples(st.booleans(), st.integers(0, 3600)), max_size=12))
# A node: whether it defaults to the tenant, and its GPUs.
nodes = st.lists(st.tuples(st.booleans(), st.lists(gpus, min_size=1, max_size=3)),
                 min_size=1, max_size=3)
# Periods back to back from a minute after T0 (half-hour zones end periods mid-hour).
periods = st.lists(st.integers(30, 48 * 60), min_size=1, max_size=3)


def model(fleet, start: datetime, end: datetime) -> tuple[float, datetime | None]:
    """(share, data from) of [start, end), hour by hour."""
    hours = [floor_hour(start) + k * HOUR for k in range(SPAN_HOURS + 2)
             if floor_hour(start) + k * HOUR < end]
    carrying = {node for node, (_default, devices) in enumerate(fleet)
                for _first, rows in devices
                for hour, (ours, _s) in rows.items() if ours and T0 + hour * HOUR in hours}
    wanted = carrying | {node for node, (default, _d) in enumerate(fleet) if default}
    present = [(max(start, T0 + timedelta(minutes=first)), rows)
               for node, (_default, devices) in enumerate(fleet) if node in wanted
               for first, rows in devices if T0 + timedelta(minutes=first) < end]
    if not present:
        return 1.0, None
    first_heard = min(since for since, _rows in present)
    expected = covered = 0.0
    for since, rows in present:
        if floor_hour(since) <= floor_hour(first_heard):
            since = start
        span = 0.0
        for hour in hours:  # the seconds of [since, end) in each hour
            overlap = min(end, hour + HOUR) - max(since, hour)
            span += max(0.0, overlap.total_seconds())
        reported = sum(s for hour, (_ours, s) in rows.items() if T0 + hour * HOUR in hours)
        expected += span
        covered += min(reported, span)
    return (covered / expected if expected else 1.0,
            first_heard if first_heard > start else None)


@pytest.mark.django_db
@settings(max_examples=examples(80), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fleet=nodes, lengths=periods, offset=st.integers(1, 600))
# A GPU first seen ten minutes before the end, with rows before that (another tenant's): what
# it reported counts up to the ten minutes expected of it, no more.
@example(fleet=[(False, [(0, {0: (True, 3600)}),
                         (170, {0: (False, 3600), 1: (False, 3600), 2: (False, 3600)})])],
         lengths=[180], offset=1)
def test_completeness_is_what_the_hour_rows_say_of_the_devices_expected(fleet, lengths,
                                                                        offset):
    with transaction.atomic():
        tenant = Tenant.objects.create(slug="ours", name="Ours")
        other = Tenant.objects.create(slug="theirs", name="Theirs")
        rows = []
        for n, (default, devices) in enumerate(fleet):
            node = Node.objects.create(name=f"node-{n}", default_tenant=tenant if default
                                       else None)
            for g, (first, hours) in enumerate(devices):
                gpu = Gpu.objects.create(uuid=f"GPU-{n}-{g}", node=node,
                                         first_seen_at=T0 + timedelta(minutes=first))
                rows += [GpuHour(gpu=gpu, tenant=tenant if ours else other,
                                 hour=T0 + hour * HOUR, reported_s=seconds)
                         for hour, (ours, seconds) in hours.items()]
        GpuHour.objects.bulk_create(rows)
        bounds = [T0 + timedelta(minutes=offset)]
        for minutes in lengths:
            bounds.append(bounds[-1] + timedelta(minutes=minutes))
        ranges = list(zip(bounds, bounds[1:], strict=False))

        found = tenant_coverage_in(tenant.pk, ranges)
        for (start, end), coverage in zip(ranges, found, strict=True):
            share, data_from = model(fleet, start, end)
            assert coverage.share == pytest.approx(share, abs=1e-12), (start, end)
            assert coverage.data_from == data_from
        transaction.set_rollback(True)
