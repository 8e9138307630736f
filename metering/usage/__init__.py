"""How the rest of gpuloans reads usage: hourly rollups by tenant, and the recount from raw samples.

loans calls these functions and nothing else of metering's tables.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db import connection, models
from django.db.models import Case, FloatField, IntegerField, Sum, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, TruncDate

from metering.models import GpuHour, TenantHour
from metering.rollups import floor_hour

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Totals:
    allocated_gpu_hours: float
    busy_gpu_hours: float
    sample_count: int


def tenant_totals(tenant_id: int | None, start: datetime, end: datetime) -> Totals:
    """A tenant's allocated and busy GPU-hours over the hours in [start, end)."""
    sums = TenantHour.objects.filter(tenant_id=tenant_id, hour__gte=start, hour__lt=end).aggregate(
        allocated=Sum("allocated_gpu_s"), busy=Sum("busy_gpu_s"), samples=Sum("sample_count")
    )
    return Totals(
        allocated_gpu_hours=(sums["allocated"] or 0.0) / 3600,
        busy_gpu_hours=(sums["busy"] or 0.0) / 3600,
        sample_count=sums["samples"] or 0,
    )


def bucket(field: str, bounds: list[datetime]):
    """An expression numbering the row by where `field` falls among sorted `bounds`: 1 for
    [bounds[0], bounds[1]), 2 for the next... (the rows must be filtered to the bounds). One pass
    over the rows whatever the number of bounds on PostgreSQL (width_bucket); a CASE on SQLite."""
    if connection.vendor == "postgresql":
        # The column is the queryset's own; bounds are bound as one array parameter.
        return RawSQL(f"width_bucket({field}, %s::timestamptz[])", (bounds,),  # noqa: S611
                      output_field=IntegerField())
    return Case(*[When(**{f"{field}__lt": bound}, then=Value(k))
                  for k, bound in enumerate(bounds[1:], start=1)],
                default=Value(len(bounds)), output_field=IntegerField())


def sums_in(queryset: models.QuerySet, field: str, ranges: list[tuple[datetime, datetime]],
            group: tuple[str, ...] = (), **aggregates) -> list[dict]:
    """For each of several ranges that do not overlap, the `aggregates` of the rows whose
    `field` falls in it (per value of `group`, as {group values: sums}), in one grouped query:
    cost linear in rows, not rows x ranges."""
    bounds = sorted({moment for span in ranges for moment in span})
    rows = (queryset.filter(**{f"{field}__gte": bounds[0], f"{field}__lt": bounds[-1]})
            .annotate(bucket=bucket(field, bounds)).values(*group, "bucket")
            .annotate(**aggregates).order_by())
    by_bucket: dict[int, list[dict]] = {}
    for row in rows:
        by_bucket.setdefault(row["bucket"], []).append(row)
    out = []
    for start, end in ranges:
        first, last = bounds.index(start) + 1, bounds.index(end) + 1
        totals: dict = {}
        for k in range(first, last):
            for row in by_bucket.get(k, []):
                key = tuple(row[name] for name in group)
                sums = totals.setdefault(key, dict.fromkeys(aggregates, 0))
                for name in aggregates:
                    sums[name] += row[name] or 0
        out.append(totals)
    return out


@dataclass(frozen=True)
class Hour:
    hour: datetime
    allocated_gpu_hours: float
    busy_gpu_hours: float
    peak_gpus: float
    sample_count: int


def tenant_hours(tenant_id: int | None, start: datetime, end: datetime) -> list[Hour]:
    """Every UTC hour in [start, end), zeros where nothing was metered (from the hour `start`
    falls in)."""
    rows = {hour: rest for hour, *rest in TenantHour.objects.filter(
        tenant_id=tenant_id, hour__gte=floor_hour(start), hour__lt=end).values_list(
            "hour", "allocated_gpu_s", "busy_gpu_s", "peak_gpus", "sample_count")}
    hours, hour = [], floor_hour(start)
    while hour < end:
        allocated, busy, peak, count = rows.get(hour, (0.0, 0.0, 0.0, 0))
        hours.append(Hour(hour, allocated / 3600, busy / 3600, peak, count))
        hour += HOUR
    return hours


def daily_allocated(start: datetime, end: datetime) -> dict[int, list[float]]:
    """Each tenant's allocated GPU-hours in each UTC day from `start` to `end` (midnights),
    oldest first, zeros where it held nothing; tenants that held nothing then left out (the
    burn-down's band is pooled from them: loans.services.ledger.forecasting)."""
    days = int((end - start) / timedelta(days=1))
    out: dict[int, list[float]] = {}
    rows = (TenantHour.objects.filter(tenant__isnull=False, hour__gte=start, hour__lt=end)
            .annotate(day=TruncDate("hour", tzinfo=UTC)).values("tenant_id", "day")
            .annotate(allocated=Sum("allocated_gpu_s")).values_list("tenant_id", "day",
                                                                    "allocated"))
    for tenant_id, day, allocated in rows:
        k = (day - start.date()).days
        if 0 <= k < days:
            out.setdefault(tenant_id, [0.0] * days)[k] += (allocated or 0.0) / 3600
    return out


Span = tuple[int, datetime, datetime]  # a tenant, and [start, end)


# One row per span (a key, its tenant, the two starts a and b, the first of them and the end),
# joined to the tenant-hours it covers: every span's sums since a and since b in one grouped
# query, each hour read once.
NESTED_SUMS = """
    SUM(CASE WHEN h.hour >= s.a THEN h.allocated_gpu_s END),
    SUM(CASE WHEN h.hour >= s.a THEN h.busy_gpu_s END),
    SUM(CASE WHEN h.hour >= s.a THEN h.sample_count END),
    SUM(CASE WHEN h.hour >= s.b THEN h.allocated_gpu_s END),
    SUM(CASE WHEN h.hour >= s.b THEN h.busy_gpu_s END),
    SUM(CASE WHEN h.hour >= s.b THEN h.sample_count END)
"""
# Where a and b are one start (span_totals): the three sums, without the CASEs (a span's
# hours are all since its start), a third of the time on a close's 1,100 spans.
SUMS = "SUM(h.allocated_gpu_s), SUM(h.busy_gpu_s), SUM(h.sample_count)"
SPAN_SUMS_SQL = """
    SELECT s.k, {sums}
    FROM {spans} JOIN metering_tenanthour h
      ON h.tenant_id = s.tenant AND h.hour >= s.first AND h.hour < s.last
    GROUP BY s.k
"""
# PostgreSQL: each span's hours read through the covering index (tenant, hour), one range a
# span. Joined as above, the planner hashes the spans and scans the whole table, every tenant's
# every hour: at 1,001 spans over 967k tenant-hours, 79 ms against 58 (bench/dashboard.py's
# fleet), and the gap grows with the years kept.
SPAN_SUMS_POSTGRESQL = """
    SELECT s.k, x.* FROM unnest(%s::integer[], %s::bigint[], %s::timestamptz[],
                                %s::timestamptz[], %s::timestamptz[], %s::timestamptz[])
                         AS s(k, tenant, a, b, first, last)
    CROSS JOIN LATERAL (
        SELECT {sums} FROM metering_tenanthour h
        WHERE h.tenant_id = s.tenant AND h.hour >= s.first AND h.hour < s.last) x
"""
SPANS_PER_QUERY = 5000  # SQLite binds six parameters a span, and allows 32,766
NOTHING = Totals(0.0, 0.0, 0)


def span_totals(spans: list[Span]) -> list[Totals]:
    """tenant_totals for each of many spans (the admin's current periods), summed by the
    database in one query whatever their number: the same hours (those that start in
    [start, end)), the same sums."""
    return [whole for whole, _part in _nested(
        [(tenant, start, start, end) for tenant, start, end in spans], SUMS)]


def nested_totals(spans: list[tuple[int, datetime, datetime, datetime]]
                  ) -> list[tuple[Totals, Totals]]:
    """For each (tenant, a, b, end), tenant_totals over [a, end) and over [b, end) (the fleet's
    periods so far and their trailing weeks), in one query whatever their number, each hour
    read once. Spans are of tenants, not of unattributed usage."""
    return _nested(spans, NESTED_SUMS)


def _nested(spans: list[tuple[int, datetime, datetime, datetime]], sums: str
            ) -> list[tuple[Totals, Totals]]:
    found: dict[int, tuple] = {}
    for offset in range(0, len(spans), SPANS_PER_QUERY):
        chunk = [(offset + k, tenant, a, b, min(a, b), end) for k, (tenant, a, b, end)
                 in enumerate(spans[offset:offset + SPANS_PER_QUERY]) if min(a, b) < end]
        if chunk:
            found.update(_span_sums(chunk, sums))
    return [found.get(k, (NOTHING, NOTHING)) for k in range(len(spans))]


def _span_sums(chunk: list[tuple], sums: str) -> dict[int, tuple[Totals, Totals]]:
    if connection.vendor == "postgresql":
        sql = SPAN_SUMS_POSTGRESQL.format(sums=sums)
        params = [list(column) for column in zip(*chunk, strict=True)]
    else:
        rows = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk))
        sql = (f"WITH s(k, tenant, a, b, first, last) AS (VALUES {rows}) "
               + SPAN_SUMS_SQL.format(spans="s", sums=sums))
        adapt = connection.ops.adapt_datetimefield_value
        params = [value for k, tenant, *moments in chunk
                  for value in (k, tenant, *map(adapt, moments))]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        out = {}
        for k, *found in cursor.fetchall():
            whole = _totals(*found[:3])
            out[k] = (whole, _totals(*found[3:]) if len(found) > 3 else whole)
        return out


def _totals(allocated, busy, count) -> Totals:
    return Totals((allocated or 0.0) / 3600, (busy or 0.0) / 3600, int(count or 0))


def sample_values(samples: models.QuerySet) -> models.QuerySet:
    """Samples as metering.rollups counts them: (gpu_id, ts, tenant_id, interval_s, allocated,
    fraction, util_pct, holder_unknown). util_pct is read as double precision: a four-byte value
    read as such comes back as its shortest decimal, not the value the database multiplies with."""
    return samples.annotate(util=Cast("util_pct", FloatField())).values_list(
        "gpu_id", "ts", "tenant_id", "interval_s", "allocated", "fraction", "util",
        "holder_unknown")


def ceil_hour(ts: datetime) -> datetime:
    hour = floor_hour(ts)
    return hour if hour == ts else hour + HOUR


@dataclass(frozen=True)
class GpuDay:
    gpu_id: int
    day: date
    allocated_gpu_hours: float
    busy_gpu_hours: float

    @property
    def utilisation_pct(self) -> float | None:
        """Busy share of the held time, percent; None where the GPU was not held."""
        if self.allocated_gpu_hours <= 0:
            return None
        return 100 * self.busy_gpu_hours / self.allocated_gpu_hours


def local_days(start: datetime, end: datetime, zone: ZoneInfo) -> list[tuple[date, datetime]]:
    """The local days of `zone` that overlap [start, end), each with its first instant in UTC
    (the first day's is `start` itself when it begins mid-day)."""
    day = start.astimezone(zone).date()
    out = []
    while True:
        first = datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)
        if first >= end:
            return out
        out.append((day, max(first, start)))
        day += timedelta(days=1)


def tenant_gpu_days(
    tenant_id: int | None, start: datetime, end: datetime, zone: ZoneInfo
) -> list[GpuDay]:
    """Each GPU's held and busy GPU-hours per local day of `zone`, for the hours in
    [start, end) the tenant held it. Summed by the database: a big tenant has a row per GPU
    and hour (a 1,000-GPU month is 720,000 rows)."""
    start = floor_hour(start)
    days = local_days(start, end, zone)
    if not days:
        return []
    if connection.vendor == "postgresql":
        return _gpu_days_postgresql(tenant_id, start, end, days)
    rows = (
        GpuHour.objects.filter(
            tenant_id=tenant_id, hour__gte=start, hour__lt=end, allocated_gpu_s__gt=0
        )
        .annotate(day=TruncDate("hour", tzinfo=zone))
        .values("gpu_id", "day")
        .annotate(allocated=Sum("allocated_gpu_s"), busy=Sum("busy_gpu_s"))
        .order_by("gpu_id", "day")
    )
    return [
        GpuDay(row["gpu_id"], row["day"], row["allocated"] / 3600, row["busy"] / 3600)
        for row in rows
    ]


# Days are numbered by width_bucket over their first instants, computed here (DST-safe) rather
# than by converting every row's hour to local time; a row per GPU (arrays of its days) keeps
# the result small.
GPU_DAYS_SQL = """
    SELECT gpu_id, array_agg(bucket ORDER BY bucket), array_agg(allocated ORDER BY bucket),
           array_agg(busy ORDER BY bucket)
    FROM (SELECT gpu_id, width_bucket(hour, %(firsts)s::timestamptz[]) AS bucket,
                 sum(allocated_gpu_s) AS allocated, sum(busy_gpu_s) AS busy
          FROM metering_gpuhour
          WHERE tenant_id IS NOT DISTINCT FROM %(tenant)s AND hour >= %(start)s
            AND hour < %(end)s AND allocated_gpu_s > 0
          GROUP BY 1, 2) AS by_day
    GROUP BY gpu_id ORDER BY gpu_id
"""


def _gpu_days_postgresql(tenant_id, start, end, days) -> list[GpuDay]:
    params = {"firsts": [first for _day, first in days], "tenant": tenant_id, "start": start,
              "end": end}
    out = []
    with connection.cursor() as cursor:
        cursor.execute(GPU_DAYS_SQL, params)
        for gpu_id, buckets, allocated, busy in cursor.fetchall():
            for bucket, a, b in zip(buckets, allocated, busy, strict=True):
                out.append(GpuDay(gpu_id, days[bucket - 1][0], a / 3600, b / 3600))
    return out
