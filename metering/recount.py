"""Writing the hourly rollups anew from the raw samples (backfills, re-attribution, the demo,
manage.py recount_rollups), and the plain-SQL bulk insert the writers share. Ingestion keeps
rollups current as samples arrive (metering/sql/rollups.sql on PostgreSQL, metering.rollups on
SQLite); metering.usage only reads them."""

from dataclasses import astuple, dataclass, fields
from datetime import datetime

import psycopg
from django.db import connection, models, transaction

from metering import rollups
from metering.models import GpuHour, RawHorizon, TenantHour, UsageSample
from metering.rollups import floor_hour
from metering.usage import HOUR, ceil_hour, sample_values


@dataclass(frozen=True)
class Recount:
    samples: int  # raw samples counted
    kept: tuple[datetime, datetime] | None  # hours left as they were: their raw data is gone


def rebuild_rollups(start: datetime, end: datetime) -> Recount:
    """Replace the rollups of the hours in [start, end) with a recount of the raw samples.

    Rollups are kept forever, raw samples only for the retention window: hours before the raw
    horizon (metering.models.RawHorizon) are left as they are, never recounted from the little
    that is left of them, and so is the first hour after it (a sample that began before the
    horizon may reach into it). For backfills, re-attribution and the demo; ingestion keeps
    rollups current as samples arrive.
    """
    # Whole hours only: a rollup half recounted would be wrong.
    start, end = floor_hour(start), ceil_hour(end)
    kept = None
    horizon = RawHorizon.complete_from()
    if horizon is not None and start < ceil_hour(horizon) + HOUR:
        kept = (start, min(ceil_hour(horizon) + HOUR, end))
        start = kept[1]
    if start >= end:
        return Recount(0, kept)
    # Samples that began in the hour before may reach into the first one; those that reach
    # past the last are counted only up to it (the hours after are not replaced).
    samples = sample_values(UsageSample.objects.filter(ts__gte=start - HOUR, ts__lt=end))
    rows = list(samples.iterator(chunk_size=20_000))
    by_tenant, by_gpu = rollups.recount(rows)
    sums = tuple(field.name for field in fields(rollups.Sums))
    hour_of = connection.ops.adapt_datetimefield_value
    with transaction.atomic():
        TenantHour.objects.filter(hour__gte=start, hour__lt=end).delete()
        GpuHour.objects.filter(hour__gte=start, hour__lt=end).delete()
        insert_rows(
            TenantHour, ("tenant_id", "hour", *sums),
            [(t, hour_of(h), *astuple(s)) for (t, h), s in by_tenant.items()
             if start <= h < end],
        )
        insert_rows(
            GpuHour, ("gpu_id", "tenant_id", "hour", *sums),
            [(g, t, hour_of(h), *astuple(s)) for (g, t, h), s in by_gpu.items()
             if start <= h < end],
        )
    return Recount(sum(1 for row in rows if row[1] >= start), kept)


ROWS_PER_INSERT = 5000


def insert_rows(
    model: type[models.Model], columns: tuple[str, ...], rows: list[tuple], *, skip_existing=False,
    checked: bool = False,
) -> None:
    """Plain SQL for bulk writes: bulk_create spends most of its time compiling SQL.

    Values must already be in database form (datetimes through adapt_datetimefield_value). On
    PostgreSQL, ROWS_PER_INSERT rows go in each statement, a column as an array: fewer round
    trips, and the sample table's rollup trigger (migration metering 0009) runs once per
    statement, not once per row. `checked` (inside the caller's transaction) tells that
    trigger the samples overlap nothing stored, so it skips its own check: for a writer that
    knows it (the demo's hourly history).
    """
    if not rows:
        return
    # Table and column names come from the model, never from input.
    target = f"{model._meta.db_table} ({', '.join(columns)})"
    conflict = " ON CONFLICT DO NOTHING" if skip_existing else ""
    if connection.vendor != "postgresql":
        values = ", ".join(["%s"] * len(columns))
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {target} VALUES ({values}){conflict}", rows)  # noqa: S608
        return
    arrays = ", ".join(
        f"%s::{model._meta.get_field(column).db_type(connection)}[]" for column in columns)
    sql = f"INSERT INTO {target} SELECT * FROM unnest({arrays}){conflict}"  # noqa: S608
    connection.ensure_connection()
    # Parameters bound by the server (Django's cursor would quote each value in Python), with
    # Django's error translation kept.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as raw:
        if checked:  # for these statements only (a SET LOCAL lasts to the transaction's end)
            raw.execute("SET LOCAL metering.checked = 'on'")
        for start in range(0, len(rows), ROWS_PER_INSERT):
            chunk = rows[start:start + ROWS_PER_INSERT]
            raw.execute(sql, [list(column) for column in zip(*chunk, strict=True)])
        if checked:
            raw.execute("SET LOCAL metering.checked = 'off'")
