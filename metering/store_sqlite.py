"""Writing a batch to SQLite, the embedded database: the same rules as on PostgreSQL, row by
row inside one transaction (SQLite has one writer at a time, so nothing can interleave)."""

import json
from collections.abc import Callable

from django.db import connection, transaction

from metering.protocol import taken
from metering.store import COLUMNS, READING, batch_sums
from metering.usage import floor_hour


def write(columns: list, finish: Callable[[], None]) -> tuple[int, list[int]]:
    """The simple path: row by row inside one transaction (SQLite has one writer at a time)."""
    adapt = connection.ops.adapt_datetimefield_value
    insert = (f"INSERT INTO metering_usagesample ({', '.join(COLUMNS[1:])}) "
              f"VALUES ({', '.join(['%s'] * (len(COLUMNS) - 1))}) ON CONFLICT DO NOTHING")
    stored = (f"SELECT {', '.join(READING)} FROM metering_usagesample "
              "WHERE gpu_id = %s AND ts = %s")
    inserted, conflicts = [], []  # positions in `columns`; the samples' batch indexes
    with transaction.atomic(), connection.cursor() as cursor:
        for position, row in enumerate(zip(*columns, strict=True)):
            index, gpu_id, ts, *rest, owner = row
            cursor.execute(insert, [gpu_id, adapt(ts), *rest, json.dumps(owner) if owner else None])
            if cursor.rowcount == 1:
                inserted.append(position)
                continue
            cursor.execute(stored, [gpu_id, adapt(ts)])
            if _reading(cursor.fetchone()) != _reading(row[5:]):
                conflicts.append(index)
        _add_to_rollups(cursor, taken(columns, inserted))
        finish()
    return len(inserted), conflicts


def _reading(values: tuple) -> tuple:
    """A stored or offered reading in one form: SQLite gives booleans as 0/1, owners as text."""
    *head, owner = values
    head[1] = bool(head[1])
    return (*head, json.loads(owner) if isinstance(owner, str) else owner)


def _add_to_rollups(cursor, columns: list) -> None:
    adapt = connection.ops.adapt_datetimefield_value
    by_tenant, by_gpu, instants = batch_sums(columns)
    peaks: dict[tuple, float] = {}
    for (tenant_id, ts), gpus in sorted(instants.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
        cursor.execute(
            "INSERT INTO metering_tenantinstant (tenant_id, ts, gpus) VALUES (%s, %s, %s) "
            "ON CONFLICT (ts, COALESCE(tenant_id, 0)) DO UPDATE SET gpus = gpus + excluded.gpus "
            "RETURNING gpus", [tenant_id, adapt(ts), gpus])
        key = (tenant_id, floor_hour(ts))
        peaks[key] = max(peaks.get(key, 0.0), cursor.fetchone()[0])
    for (tenant_id, hour), sums in by_tenant.items():
        cursor.execute(
            "INSERT INTO metering_tenanthour (tenant_id, hour, allocated_gpu_s, busy_gpu_s, "
            "sample_count, peak_gpus, reported_s) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (hour, COALESCE(tenant_id, 0)) DO UPDATE SET "
            "allocated_gpu_s = allocated_gpu_s + excluded.allocated_gpu_s, "
            "busy_gpu_s = busy_gpu_s + excluded.busy_gpu_s, "
            "sample_count = sample_count + excluded.sample_count, "
            "peak_gpus = max(peak_gpus, excluded.peak_gpus), "
            "reported_s = reported_s + excluded.reported_s",
            [tenant_id, adapt(hour), sums.allocated_gpu_s, sums.busy_gpu_s, sums.sample_count,
             peaks.get((tenant_id, hour), 0.0), sums.reported_s])
    for (gpu_id, tenant_id, hour), sums in by_gpu.items():
        cursor.execute(
            "INSERT INTO metering_gpuhour (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s, "
            "sample_count, peak_gpus, reported_s) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (hour, gpu_id, COALESCE(tenant_id, 0)) DO UPDATE SET "
            "allocated_gpu_s = allocated_gpu_s + excluded.allocated_gpu_s, "
            "busy_gpu_s = busy_gpu_s + excluded.busy_gpu_s, "
            "sample_count = sample_count + excluded.sample_count, "
            "peak_gpus = max(peak_gpus, excluded.peak_gpus), "
            "reported_s = reported_s + excluded.reported_s",
            [gpu_id, tenant_id, adapt(hour), sums.allocated_gpu_s, sums.busy_gpu_s,
             sums.sample_count, sums.peak_gpus, sums.reported_s])
