"""A tenant's hourly usage as plain lists, for jobs that read months of it for every contract
(the recommendation job reads six). usage.tenant_hours gives the same hours as objects with
their times; decoding a datetime and building an object per hour cost 56 ms a contract for
six months (bench/jobs.py), so this asks the database for each hour's offset instead."""

import math
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

from metering.models import TenantHour
from metering.rollups import floor_hour

HOUR_SECONDS = 3600
# The hour's offset from the first, in whole hours, as each database computes it.
OFFSET_SQL = {
    "postgresql": "CAST(ROUND(EXTRACT(EPOCH FROM (hour - %s)) / 3600) AS INTEGER)",
    "sqlite": "CAST(ROUND((julianday(hour) - julianday(%s)) * 24) AS INTEGER)",
}


@dataclass
class Series:
    """Every UTC hour from `start`: GPU-hours held and busy, peak GPUs, samples (zeros where
    nothing was metered)."""

    start: datetime
    allocated: list[float] = field(default_factory=list)
    busy: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


def tenant_series(tenant_id: int, start: datetime, end: datetime) -> Series:
    """The hours of [start, end) from the hour `start` falls in, as usage.tenant_hours."""
    first = floor_hour(start)
    count = max(0, math.ceil((end - first).total_seconds() / HOUR_SECONDS))
    series = Series(first, [0.0] * count, [0.0] * count, [0.0] * count, [0] * count)
    table = TenantHour._meta.db_table
    sql = (f"SELECT {OFFSET_SQL[connection.vendor]}, allocated_gpu_s, busy_gpu_s, peak_gpus, "
           f"sample_count FROM {table} WHERE tenant_id = %s AND hour >= %s AND hour < %s")
    # As the ORM writes times for this database (SQLite compares them as text).
    at = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(sql, [at(first), tenant_id, at(first), at(end)])
        for offset, allocated, busy, peak, samples in cursor.fetchall():
            if 0 <= offset < count:
                series.allocated[offset] = allocated / HOUR_SECONDS
                series.busy[offset] = busy / HOUR_SECONDS
                series.peaks[offset] = peak
                series.counts[offset] = samples
    return series
