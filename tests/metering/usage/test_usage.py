from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction

from metering.models import Gpu, GpuHour, Node, TenantHour, UsageSample
from metering.partitions import drop_before, ensure_partitions, partition_name
from metering.recount import rebuild_rollups
from metering.retention import purge_raw_samples
from metering.rollups import recount
from metering.usage import floor_hour, tenant_hours, tenant_totals
from tests.helpers import assert_rollups_equal_a_recount

T0 = datetime(2026, 11, 29, 10, tzinfo=UTC)


@pytest.fixture
def gpus(tenant):
    node = Node.objects.create(name="gpu-node-01", default_tenant=tenant)
    return [Gpu.objects.create(uuid=f"GPU-{i}", node=node, index=i) for i in range(3)]


def add(gpu, ts, tenant=None, *, allocated=True, fraction=1.0, util=50.0, interval=60):
    UsageSample.objects.create(gpu=gpu, ts=ts, tenant=tenant,
                               interval_s=interval, allocated=allocated, fraction=fraction,
                               util_pct=util)


def test_floor_hour_is_the_utc_hour_start():
    shanghai = datetime(2026, 11, 29, 18, 59, 59, tzinfo=UTC).astimezone()
    assert floor_hour(shanghai) == datetime(2026, 11, 29, 18, tzinfo=UTC)


def test_recount_sums_seconds_busy_share_and_the_peak_at_one_instant():
    rows = [
        (1, T0, 7, 60, True, 1.0, 100.0, False),
        (2, T0, 7, 60, True, 0.5, 50.0, False),
        (1, T0 + timedelta(minutes=1), 7, 60, True, 1.0, 0.0, False),
        (3, T0, 7, 60, False, 1.0, None, False),
        (3, T0 + timedelta(minutes=1), None, 60, True, 1.0, 10.0, False),
    ]
    by_tenant, by_gpu = recount(rows)
    sums = by_tenant[(7, T0)]
    assert sums.allocated_gpu_s == 60 + 30 + 60
    assert sums.busy_gpu_s == 60 + 15
    assert sums.sample_count == 4
    assert sums.peak_gpus == 1.5
    assert by_tenant[(None, T0)].allocated_gpu_s == 60
    assert by_gpu[(2, 7, T0)].peak_gpus == 0.5
    assert by_gpu[(3, 7, T0)].allocated_gpu_s == 0


def test_a_sample_whose_holder_is_unknown_is_counted_but_not_as_reported_time():
    rows = [(1, T0, None, 60, False, 1.0, 80.0, True), (1, T0 + timedelta(minutes=1), 7, 60,
                                                       True, 1.0, 80.0, False)]
    by_tenant, by_gpu = recount(rows)
    assert by_gpu[(1, None, T0)].sample_count == 1
    assert by_gpu[(1, None, T0)].reported_s == 0  # a gap in the device's completeness
    assert by_gpu[(1, 7, T0)].reported_s == 60
    assert by_tenant[(None, T0)].reported_s == 0 and by_tenant[(7, T0)].reported_s == 60


def test_rebuilt_rollups_equal_the_raw_samples_and_replace_stale_ones(tenant, gpus):
    for minute in range(120):
        ts = T0 + timedelta(minutes=minute)
        add(gpus[0], ts, tenant, util=80.0)
        add(gpus[1], ts, tenant, fraction=1 / 7, util=30.0)
        add(gpus[2], ts, None, allocated=minute % 2 == 0)
    TenantHour.objects.create(tenant=tenant, hour=T0 - timedelta(hours=5), allocated_gpu_s=1)
    counted = rebuild_rollups(T0 - timedelta(hours=6), T0 + timedelta(hours=2))
    assert counted.samples == 360 and counted.kept is None
    assert not TenantHour.objects.filter(hour__lt=T0).exists()
    totals = tenant_totals(tenant.pk, T0, T0 + timedelta(hours=2))
    assert totals.allocated_gpu_hours == pytest.approx(2 + 2 / 7, abs=1e-9)
    assert totals.busy_gpu_hours == pytest.approx(2 * 0.8 + 2 / 7 * 0.3, abs=1e-9)
    assert totals.sample_count == 240
    assert tenant_totals(None, T0, T0 + timedelta(hours=2)).allocated_gpu_hours == 1.0
    hours = tenant_hours(tenant.pk, T0 - timedelta(hours=1), T0 + timedelta(hours=2))
    assert [h.hour for h in hours] == [T0 - timedelta(hours=1), T0, T0 + timedelta(hours=1)]
    assert [h.allocated_gpu_hours for h in hours] == pytest.approx([0, 1 + 1 / 7, 1 + 1 / 7])
    assert TenantHour.objects.get(tenant=tenant, hour=T0).peak_gpus == pytest.approx(1 + 1 / 7)
    assert GpuHour.objects.filter(hour=T0).count() == 3


def test_rebuilding_twice_changes_nothing(tenant, gpus):
    add(gpus[0], T0, tenant)
    rebuild_rollups(T0, T0 + timedelta(hours=1))
    first = list(TenantHour.objects.values_list("tenant", "hour", "allocated_gpu_s"))
    rebuild_rollups(T0, T0 + timedelta(hours=1))
    assert list(TenantHour.objects.values_list("tenant", "hour", "allocated_gpu_s")) == first


def test_one_rollup_row_per_hour_for_unattributed_usage_too(db, gpus):
    TenantHour.objects.create(tenant=None, hour=T0)
    with pytest.raises(IntegrityError), transaction.atomic():
        TenantHour.objects.create(tenant=None, hour=T0)


def test_retention_forgets_raw_samples_but_keeps_rollups(tenant, gpus, settings):
    settings.RAW_RETENTION_DAYS = 2
    now = T0 + timedelta(days=3)
    add(gpus[0], T0, tenant)  # three days old: past retention
    add(gpus[0], now - timedelta(hours=1), tenant)
    rebuild_rollups(T0, now)
    purged = purge_raw_samples(now)
    assert purged.cutoff == now - timedelta(days=2)
    assert list(UsageSample.objects.values_list("ts", flat=True)) == [now - timedelta(hours=1)]
    assert TenantHour.objects.filter(hour=T0).exists()
    assert purge_raw_samples(now).rows_deleted == 0


@pytest.mark.postgresql
def test_on_postgresql_retention_drops_whole_daily_partitions(tenant, gpus, settings):
    settings.RAW_RETENTION_DAYS = 2
    now = T0 + timedelta(days=3)
    days = {(T0 + timedelta(days=k)).date() for k in range(4)}
    # Partitions are made outside the tests' transactions: other tests of this database may
    # have left older days. Those go first, so the count below is this test's own.
    drop_before(T0)
    ensure_partitions(days)
    for k in range(4):
        add(gpus[0], T0 + timedelta(days=k), tenant)
    purged = purge_raw_samples(now)
    assert purged.partitions_dropped == 1  # T0's day ended more than two days before now
    assert UsageSample.objects.count() == 3
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [partition_name(T0.date())])
        assert cursor.fetchone()[0] is None


@pytest.mark.postgresql
def test_a_day_whose_samples_wait_in_the_default_partition_gets_its_own(tenant, gpus):
    add(gpus[0], T0, tenant)  # no partition for T0's day yet: kept in the default one
    ensure_partitions({T0.date()})
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partition_name(T0.date())}")
        assert cursor.fetchone()[0] == 1
        cursor.execute("SELECT count(*) FROM metering_usagesample_default")
        assert cursor.fetchone()[0] == 0
    assert UsageSample.objects.count() == 1
    # Moving the sample into its day's partition did not count it again.
    assert_rollups_equal_a_recount()
    assert TenantHour.objects.get(tenant=tenant, hour=T0).sample_count == 1


@pytest.mark.postgresql
def test_on_postgresql_the_database_adds_every_inserted_sample_to_the_rollups(tenant, gpus):
    """Not only the ingestion path's COPY: any INSERT (a backfill, a script) is counted, in its
    own statement, and a row the insert skipped as already stored is not counted again."""
    add(gpus[0], T0, tenant, fraction=0.5, util=40.0)
    add(gpus[1], T0, tenant, util=0.0)
    add(gpus[2], T0 + timedelta(minutes=1), None, allocated=False)
    assert_rollups_equal_a_recount()
    hour = TenantHour.objects.get(tenant=tenant, hour=T0)
    assert (hour.allocated_gpu_s, hour.busy_gpu_s, hour.peak_gpus) == (90.0, 12.0, 1.5)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO metering_usagesample (gpu_id, ts, tenant_id, interval_s,"
            " allocated, fraction) VALUES (%s, %s, %s, 60, true, 1.0), (%s, %s, %s, 60,"
            " true, 1.0) ON CONFLICT DO NOTHING",
            [gpus[0].pk, T0, tenant.pk,  # stored already: skipped
             gpus[0].pk, T0 + timedelta(hours=1), tenant.pk])
    assert_rollups_equal_a_recount()
    assert TenantHour.objects.get(tenant=tenant, hour=T0).sample_count == 2
    assert GpuHour.objects.get(gpu=gpus[0], hour=T0 + timedelta(hours=1)).allocated_gpu_s == 60


S = timedelta(seconds=1)


@pytest.mark.postgresql
@pytest.mark.parametrize(("samples", "overlap"), [
    # (device, seconds after T0, interval): one statement's samples
    ([(0, 0, 60), (0, 60, 60), (0, 120, 60), (1, 0, 30), (1, 30, 30)], False),  # on grids
    ([(0, 0, 60), (0, 30, 60)], True),  # off the 60 s grid, one interval
    ([(0, 0, 120), (0, 60, 60)], True),  # each on its own grid, two intervals
    ([(0, 0, 60), (0, 90, 60), (1, 0.5, 60), (1, 60.5, 60)], False),  # off grid, no overlap
    ([(0, 0, 60), (1, 0, 60), (1, 59.999999, 60)], True),  # a microsecond off the grid
])
def test_on_postgresql_the_database_refuses_samples_of_a_device_overlapping_in_one_statement(
        tenant, gpus, samples, overlap):
    """Plain SQL, no ingestion path: the trigger skips its sample-by-sample comparison only
    for a device whose samples all have one interval and start on that interval's grid
    (migration metering 0014), and compares every other statement."""
    rows = [(gpus[device].pk, T0 + start * S, tenant.pk, interval)
            for device, start, interval in samples]
    insert = ("INSERT INTO metering_usagesample (gpu_id, ts, tenant_id, interval_s, allocated,"
              " fraction) SELECT * , true, 1.0 FROM (VALUES "
              + ", ".join(["(%s, %s::timestamptz, %s, %s)"] * len(rows)) + ") v")
    with connection.cursor() as cursor:
        if overlap:
            with pytest.raises(IntegrityError, match="overlap in the statement"), \
                    transaction.atomic():
                cursor.execute(insert, [value for row in rows for value in row])
        else:
            cursor.execute(insert, [value for row in rows for value in row])
    assert UsageSample.objects.count() == (0 if overlap else len(rows))
    assert_rollups_equal_a_recount()


@pytest.mark.postgresql
def test_settling_a_finished_day_rebuilds_its_indexes_and_keeps_every_sample(tenant, gpus):
    from metering import partitions

    partitions.ensure_partitions({T0.date()})
    for minute in range(60):
        add(gpus[minute % 3], T0 + timedelta(minutes=minute), tenant)
    before = sorted(UsageSample.objects.values_list("gpu_id", "ts"))
    assert partitions.settle(T0.date())
    assert sorted(UsageSample.objects.values_list("gpu_id", "ts")) == before
    assert not partitions.settle(date(1999, 1, 1))  # no such partition
