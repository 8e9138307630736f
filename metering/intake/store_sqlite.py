"""Writing a batch to SQLite, the embedded database: the same rules as on PostgreSQL, every
batch the checked path (metering.intake.store.check) inside one transaction (SQLite has one writer
at a time, so nothing can interleave), with the rollups summed here (metering.rollups) and
the touched tenant-hours' peaks recounted at once."""

from collections.abc import Callable

from django.db import connection, transaction

from metering import peaks, rollups
from metering.intake import store
from metering.intake.columns import taken
from metering.intake.store import COLUMNS
from metering.models import Gpu

INSERT = (f"INSERT INTO metering_usagesample ({', '.join(COLUMNS[1:])}) "
          f"VALUES ({', '.join(['%s'] * (len(COLUMNS) - 1))})")


def write(columns: list, names: list[str], finish: Callable[[], None],
          families: dict[int, int] | None = None) -> tuple[int, list[dict]]:
    adapt = connection.ops.adapt_datetimefield_value
    # As on PostgreSQL: a device's samples are decided in time order.
    columns, names = store.in_time_order(columns, names)
    with transaction.atomic(), connection.cursor() as cursor:
        stored, kin = store.stored_near(columns, families)
        decision = store.check(columns, stored, names, lambda offered, kept: offered == kept,
                               families, kin)
        new = taken(columns, decision.accepted)
        cursor.executemany(INSERT, [[gpu, adapt(ts), *rest]
                                    for _index, gpu, ts, *rest in zip(*new, strict=True)])
        _cover(new)
        touched = _add_to_rollups(cursor, new)
        peaks.recount(touched)
        finish()
    return len(decision.accepted), decision.rejected


def _cover(columns: list) -> None:
    """Each device's stored span grows to hold the new samples."""
    _index, gpu, ts, _tenant, _owner, interval, *_rest = columns
    spans: dict[int, list] = {}
    for g, t, i in zip(gpu, ts, interval, strict=True):
        first, last = spans.setdefault(g, [t, t + i * store.SECOND])
        spans[g] = [min(first, t), max(last, t + i * store.SECOND)]
    for device in Gpu.objects.filter(pk__in=list(spans)).only("covered_from", "covered_until"):
        first, last = spans[device.pk]
        Gpu.objects.filter(pk=device.pk).update(
            covered_from=min(device.covered_from or first, first),
            covered_until=max(device.covered_until or last, last))


def _add_to_rollups(cursor, columns: list) -> set[tuple]:
    """Add the new samples' sums to the hours; returns the (tenant, hour)s touched."""
    adapt = connection.ops.adapt_datetimefield_value
    (_index, gpu, ts, tenant, _owner, interval, allocated, fraction, util, _memory, _power,
     _temp, unknown) = columns
    by_tenant, by_gpu = rollups.tally(zip(gpu, ts, tenant, interval, allocated, fraction, util,
                                          unknown, strict=True))
    # One statement a table, many rows: a batch of hourly samples touches hundreds of hours.
    cursor.executemany(
        "INSERT INTO metering_tenanthour (tenant_id, hour, allocated_gpu_s, busy_gpu_s, "
        "sample_count, peak_gpus, reported_s, peak_stale) "
        "VALUES (%s, %s, %s, %s, %s, 0, %s, 1) "
        "ON CONFLICT (hour, COALESCE(tenant_id, 0)) DO UPDATE SET "
        "allocated_gpu_s = allocated_gpu_s + excluded.allocated_gpu_s, "
        "busy_gpu_s = busy_gpu_s + excluded.busy_gpu_s, "
        "sample_count = sample_count + excluded.sample_count, "
        "reported_s = reported_s + excluded.reported_s, peak_stale = 1",
        [[tenant_id, adapt(hour), sums.allocated_gpu_s, sums.busy_gpu_s, sums.sample_count,
          sums.reported_s] for (tenant_id, hour), sums in by_tenant.items()])
    cursor.executemany(
        "INSERT INTO metering_gpuhour (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s, "
        "sample_count, peak_gpus, reported_s) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (hour, gpu_id, COALESCE(tenant_id, 0)) DO UPDATE SET "
        "allocated_gpu_s = allocated_gpu_s + excluded.allocated_gpu_s, "
        "busy_gpu_s = busy_gpu_s + excluded.busy_gpu_s, "
        "sample_count = sample_count + excluded.sample_count, "
        "peak_gpus = max(peak_gpus, excluded.peak_gpus), "
        "reported_s = reported_s + excluded.reported_s",
        [[gpu_id, tenant_id, adapt(hour), sums.allocated_gpu_s, sums.busy_gpu_s,
          sums.sample_count, sums.peak_gpus, sums.reported_s]
         for (gpu_id, tenant_id, hour), sums in by_gpu.items()])
    return set(by_tenant)
