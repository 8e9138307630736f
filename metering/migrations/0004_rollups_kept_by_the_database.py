"""On PostgreSQL, the database adds every insert into the sample table to the rollups.

A statement-level trigger reads the rows the statement inserted (its transition table: only
those really inserted, so a retried batch's ON CONFLICT DO NOTHING counts nothing twice) and
adds their sums to the per-GPU and per-tenant hours and to the tenants' instants, in the
inserting statement's transaction. The ingestion path used to compute these sums in Python and
send them as arrays in a statement of their own: the web worker now saves about half a
millisecond a batch, and PostgreSQL spends about what it spent on that statement (0.7-1 ms
a 500-sample batch, most of it the upserts).

The sums are the ones metering.usage.tally makes (the recount, and SQLite's ingestion): per
(GPU, tenant, UTC hour) the allocated GPU-seconds (interval x fraction of held samples), the
busy ones (times util_pct / 100 where util_pct is non-zero), the samples, the reported seconds
and the greatest fraction held; per (tenant, instant) the fractions held, whose running total
gives the tenant's peak for the hour. Upserts go in sorted order, so concurrent batches lock
rows in one order (no deadlocks). PostgreSQL refuses a product of floats that underflows to 0
(Python gives 0), so a busy time from a fraction or a utilisation under 1e-150 counts as 0: at
most 4e-147 GPU-seconds a sample.

Statement triggers on a partitioned table fire for statements that name it, not for rows
moved into a new day's partition (metering.partitions), which are counted already. A session
that must write raw rows without rollups (a benchmark's raw COPY) sets session_replication_role
to replica. SQLite has no such trigger; its ingestion path adds the sums itself.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION metering_add_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH instants AS (
        INSERT INTO metering_tenantinstant AS t (tenant_id, ts, gpus)
        SELECT tenant_id, ts, sum(fraction) FROM inserted WHERE allocated
        GROUP BY tenant_id, ts ORDER BY COALESCE(tenant_id, 0), ts
        ON CONFLICT (ts, (COALESCE(tenant_id, 0))) DO UPDATE SET gpus = t.gpus + EXCLUDED.gpus
        RETURNING tenant_id, date_bin('1 hour', ts, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour,
                  gpus
    ), peaks AS (
        SELECT tenant_id, hour, max(gpus) AS gpus FROM instants GROUP BY tenant_id, hour
    ), gpu_hours AS MATERIALIZED (
        SELECT gpu_id, tenant_id, date_bin('1 hour', ts, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour,
               COALESCE(sum(interval_s * fraction) FILTER (WHERE allocated), 0) AS allocated_s,
               COALESCE(sum(interval_s * fraction * util_pct / 100)
                        FILTER (WHERE allocated AND fraction >= 1e-150 AND util_pct >= 1e-150),
                        0) AS busy_s,
               count(*) AS samples,
               COALESCE(max(fraction) FILTER (WHERE allocated), 0) AS peak,
               sum(interval_s)::float8 AS reported_s
        FROM inserted GROUP BY 1, 2, 3
    ), tenant_hours AS (
        INSERT INTO metering_tenanthour AS t (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                              sample_count, peak_gpus, reported_s)
        SELECT s.tenant_id, s.hour, s.allocated_s, s.busy_s, s.samples, COALESCE(p.gpus, 0),
               s.reported_s
        FROM (SELECT tenant_id, hour, sum(allocated_s) AS allocated_s, sum(busy_s) AS busy_s,
                     sum(samples) AS samples, sum(reported_s) AS reported_s
              FROM gpu_hours GROUP BY tenant_id, hour) s
        LEFT JOIN peaks p ON p.hour = s.hour AND p.tenant_id IS NOT DISTINCT FROM s.tenant_id
        ORDER BY COALESCE(s.tenant_id, 0), s.hour
        ON CONFLICT (hour, (COALESCE(tenant_id, 0))) DO UPDATE SET
            allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
            busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
            sample_count = t.sample_count + EXCLUDED.sample_count,
            peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus),
            reported_s = t.reported_s + EXCLUDED.reported_s
        RETURNING 1
    )
    INSERT INTO metering_gpuhour AS t (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                       sample_count, peak_gpus, reported_s)
    SELECT gpu_id, tenant_id, hour, allocated_s, busy_s, samples, peak, reported_s
    FROM gpu_hours ORDER BY gpu_id, COALESCE(tenant_id, 0), hour
    ON CONFLICT (hour, gpu_id, (COALESCE(tenant_id, 0))) DO UPDATE SET
        allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
        busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
        sample_count = t.sample_count + EXCLUDED.sample_count,
        peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus),
        reported_s = t.reported_s + EXCLUDED.reported_s;
    RETURN NULL;
END
$$
"""

TRIGGER = """
CREATE TRIGGER metering_usagesample_rollups AFTER INSERT ON metering_usagesample
REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION metering_add_rollups()
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION)
    schema_editor.execute(TRIGGER)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "DROP TRIGGER IF EXISTS metering_usagesample_rollups ON metering_usagesample")
    schema_editor.execute("DROP FUNCTION IF EXISTS metering_add_rollups()")


class Migration(migrations.Migration):
    dependencies = [("metering", "0003_rollups_reported_seconds")]

    operations = [migrations.RunPython(create, drop)]
