"""Exact peaks: the most GPUs a tenant held at one moment of an hour, recounted from the raw
samples for the tenant-hours whose peak is stale (in SQL on PostgreSQL, by
metering.rollups.peaks elsewhere: the same sweep). A batch can only
raise an hour's peak to what the batch alone shows (samples of other batches overlap it in
time), so it marks the hour stale; on PostgreSQL this runs every minute (Celery beat), on
SQLite with every batch. Hours whose raw samples are purged keep the peak they had."""

from collections import defaultdict
from datetime import datetime, timedelta

from django.db import connection

from metering import rollups
from metering.models import TenantHour, UsageSample
from metering.rollups import HOUR
from metering.usage import sample_values

BATCH = 2000  # stale tenant-hours recounted a run


def recount(keys: set[tuple[int | None, datetime]]) -> int:
    """Recount the peaks of these (tenant, hour)s, exact from then on (on SQLite, whose one
    writer cannot land a batch meanwhile); returns how many were recounted. Hours close
    together are read in one query (a backfill of a month is a few queries, not one an hour)."""
    for run in _runs(sorted({hour for _tenant, hour in keys})):
        wanted = {(tenant, hour) for tenant, hour in keys if run[0] <= hour <= run[-1]}
        tenants = {tenant for tenant, _hour in wanted}
        samples = UsageSample.objects.filter(ts__gte=run[0] - HOUR, ts__lt=run[-1] + HOUR,
                                             allocated=True)
        named = [t for t in tenants if t is not None]
        if None in tenants:
            samples = samples.filter(tenant_id__in=named) | samples.filter(tenant_id=None)
        else:
            samples = samples.filter(tenant_id__in=named)
        found = rollups.peaks(sample_values(samples), hours=wanted)
        by_peak: dict[float, list] = defaultdict(list)
        for key in wanted:
            by_peak[found.get(key, 0.0)].append(key)
        for peak, hours in by_peak.items():
            for tenant_id in {tenant for tenant, _hour in hours}:
                TenantHour.objects.filter(
                    tenant_id=tenant_id, hour__in=[h for t, h in hours if t == tenant_id]
                ).update(peak_gpus=peak, peak_stale=False)
    return len(keys)


RUN_GAP = timedelta(hours=24)


def _runs(hours: list[datetime]) -> list[list[datetime]]:
    """The sorted hours cut where two lie more than RUN_GAP apart."""
    runs: list[list[datetime]] = []
    for hour in hours:
        if runs and hour - runs[-1][-1] <= RUN_GAP:
            runs[-1].append(hour)
        else:
            runs.append([hour])
    return runs


# The same sweep as metering.rollups.peaks, in the database: each stale tenant-hour's samples
# (those covering part of the hour) as a start and an end clipped to the hour, summed in time
# order with ends before starts at one moment; the peak is the greatest running sum. Rows a
# batch is updating are skipped (it marks them stale again).
REFRESH = """
WITH stale AS (
    SELECT id, tenant_id, hour FROM metering_tenanthour WHERE peak_stale
    ORDER BY hour LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), covering AS (
    SELECT st.id, st.hour, s.ts, s.ts + s.interval_s * interval '1 second' AS ends, s.fraction
    FROM stale st JOIN metering_usagesample s
      ON s.tenant_id IS NOT DISTINCT FROM st.tenant_id
     AND s.ts >= st.hour - interval '1 hour' AND s.ts < st.hour + interval '1 hour'
    WHERE s.allocated AND s.ts + s.interval_s * interval '1 second' > st.hour
), changes AS (
    SELECT id, greatest(ts, hour) AS moment, fraction AS change FROM covering
    UNION ALL
    SELECT id, least(ends, hour + interval '1 hour'), -fraction FROM covering
), held AS (
    SELECT id, sum(change) OVER (PARTITION BY id ORDER BY moment, change
                                 ROWS UNBOUNDED PRECEDING) AS gpus
    FROM changes
), peaks AS (
    SELECT id, max(gpus) AS gpus FROM held GROUP BY id
)
UPDATE metering_tenanthour h
SET peak_gpus = round(greatest(COALESCE(p.gpus, 0), 0)::numeric, %(places)s)::float8,
    peak_stale = false
FROM stale st LEFT JOIN peaks p ON p.id = st.id
WHERE h.id = st.id
"""


def refresh(limit: int = BATCH) -> int:
    """Recount up to `limit` stale peaks, oldest hours first; returns how many. A batch that
    lands meanwhile marks its hour stale again, for the next run."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(REFRESH, {"limit": limit, "places": rollups.PEAK_PLACES})
            return cursor.rowcount
    stale = list(TenantHour.objects.filter(peak_stale=True).order_by("hour")
                 .values_list("pk", "tenant_id", "hour")[:limit])
    if not stale:
        return 0
    TenantHour.objects.filter(pk__in=[pk for pk, _t, _h in stale]).update(peak_stale=False)
    return recount({(tenant_id, hour) for _pk, tenant_id, hour in stale})


def refresh_all() -> int:
    """Every stale peak (the tests and the benchmarks, before comparing with a recount)."""
    done = total = refresh()
    while done:
        done = refresh()
        total += done
    return total
