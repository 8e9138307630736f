-- The rollup trigger's function, whole, as PostgreSQL runs it (metering/sql/__init__.py loads
-- it; a test compares it with pg_get_functiondef). Bound once, by migration 0009:
--
--   CREATE TRIGGER metering_usagesample_rollups AFTER INSERT ON metering_usagesample
--   REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION metering_add_rollups()
--
-- One statement of samples (`inserted`, a COPY of one batch) in, in this order:
--   1. each device's span in the statement, and whether its samples lie on one grid;
--   2. the devices' rows (and their physical GPUs' where several devices share one) locked in
--      id order, their covered spans grown;
--   3. unless the intake checked it already (metering.checked): no sample overlaps another of
--      its device, and the fractions of one physical GPU never pass 1 at one moment;
--   4. each sample counted in the hours it covers, in proportion, into the tenant hours and
--      the GPU hours (metering_tenanthour, metering_gpuhour).
-- SQLite keeps the same arithmetic in Python (metering.rollups, metering.intake.store).
--
-- To change it: edit this file and add a migration that runs metering.sql.load_rollups (see
-- metering/migrations/0016_rollup_trigger_from_its_file.py); never edit an older migration.
CREATE OR REPLACE FUNCTION metering_add_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids integer[];
    firsts timestamptz[];
    lasts timestamptz[];
    backfill boolean;
    gridded boolean;
    families integer[];
BEGIN
    -- Each device's span in the statement, and whether all its samples lie on one grid.
    SELECT array_agg(gpu_id ORDER BY gpu_id), array_agg(first ORDER BY gpu_id),
           array_agg(last ORDER BY gpu_id), bool_and(on_grid)
      INTO ids, firsts, lasts, gridded
      FROM (SELECT gpu_id, min(ts) AS first,
                   max(ts + interval_s * interval '1 second') AS last,
                   min(interval_s) = max(interval_s)
                   AND bool_and(date_bin(interval_s * interval '1 second', ts, TIMESTAMPTZ '1970-01-01 00:00+00') = ts)
                   AS on_grid
            FROM inserted GROUP BY gpu_id) spans;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- Physical GPUs shared by several devices (a GPU with MIG instances or replicas): their
    -- rows are locked with the devices', and their devices' fractions are checked together.
    SELECT array_agg(DISTINCT coalesce(physical_id, id))
           FILTER (WHERE physical_id IS NOT NULL OR shared)
      INTO families FROM metering_gpu WHERE id = ANY(ids);
    -- The devices' rows are locked in id order (concurrent statements of one device queue
    -- here; no deadlocks) and their old spans read: a statement inside them (a backfill) is
    -- looked at sample by sample. Then each span grows to hold the statement's samples.
    SELECT coalesce(bool_or(s.first < held.covered_until AND s.last > held.covered_from),
                    false)
      INTO backfill
      FROM (SELECT id, covered_from, covered_until FROM metering_gpu
            WHERE id = ANY(ids || coalesce(families, '{}')) ORDER BY id FOR UPDATE) held
      JOIN unnest(ids, firsts, lasts) AS s(id, first, last) ON s.id = held.id;
    UPDATE metering_gpu g SET covered_from = LEAST(g.covered_from, s.first),
                              covered_until = GREATEST(g.covered_until, s.last)
      FROM unnest(ids, firsts, lasts) AS s(id, first, last)
     WHERE g.id = ANY(ids) AND g.id = s.id;
    IF coalesce(current_setting('metering.checked', true), '') <> 'on' THEN
        IF backfill THEN
            IF EXISTS (SELECT 1 FROM metering_usagesample u JOIN inserted i ON u.gpu_id = i.gpu_id
                       WHERE u.ts >= (SELECT min(ts) FROM inserted) - interval '1 hour'
                         AND u.ts < (SELECT max(last) FROM unnest(lasts) AS l(last))
                         AND u.ts <> i.ts
                         AND u.ts < i.ts + i.interval_s * interval '1 second'
                         AND u.ts + u.interval_s * interval '1 second' > i.ts) THEN
                RAISE EXCEPTION 'a sample overlaps another sample of its device'
                    USING ERRCODE = 'exclusion_violation';
            END IF;
        ELSIF NOT gridded
              AND EXISTS (SELECT 1 FROM (SELECT ts, interval_s,
                                                lead(ts) OVER (PARTITION BY gpu_id ORDER BY ts)
                                                AS next
                                         FROM inserted) x
                          WHERE x.next < x.ts + x.interval_s * interval '1 second') THEN
            RAISE EXCEPTION 'samples of one device overlap in the statement'
                USING ERRCODE = 'exclusion_violation';
        END IF;
        IF families IS NOT NULL AND EXISTS (
            WITH family AS (
                SELECT id AS gpu_id, coalesce(physical_id, id) AS physical FROM metering_gpu
                WHERE id = ANY(families) OR physical_id = ANY(families)
            ), fresh AS (
                SELECT f.physical, i.ts, i.ts + i.interval_s * interval '1 second' AS ends
                FROM inserted i JOIN family f ON f.gpu_id = i.gpu_id
            ), held AS (  -- every stored sample of the families near the statement, its own too
                SELECT f.physical, u.ts, u.ts + u.interval_s * interval '1 second' AS ends,
                       u.fraction
                FROM metering_usagesample u JOIN family f ON f.gpu_id = u.gpu_id
                WHERE u.ts >= (SELECT min(ts) FROM fresh) - interval '1 hour'
                  AND u.ts < (SELECT max(ends) FROM fresh)
            ), moments AS (
                SELECT DISTINCT h.physical, h.ts AS at FROM held h JOIN fresh n
                  ON n.physical = h.physical AND n.ts <= h.ts AND h.ts < n.ends
            )
            SELECT 1 FROM moments m JOIN held h
              ON h.physical = m.physical AND h.ts <= m.at AND m.at < h.ends
            GROUP BY m.physical, m.at HAVING sum(h.fraction) > 1 + 1e-9) THEN
            RAISE EXCEPTION 'the fractions of one physical GPU pass 1 at one moment'
                USING ERRCODE = 'exclusion_violation';
        END IF;
    END IF;

    -- A sample counts in the hours it covers, in proportion (its sample count goes to the
    -- hour it starts in); reported_s leaves out samples whose holder is unknown.
    WITH parts AS (
        SELECT i.gpu_id, i.tenant_id, i.allocated, i.fraction, i.util_pct, i.holder_unknown,
               h.hour, least(i.interval_s::float8, 3600 - date_part('epoch', i.ts - h.hour))
               AS seconds, true AS starts
        FROM inserted i
        CROSS JOIN LATERAL (SELECT date_bin('1 hour', i.ts, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour) h
        UNION ALL  -- the rest of a sample that runs into the next hour
        SELECT i.gpu_id, i.tenant_id, i.allocated, i.fraction, i.util_pct, i.holder_unknown,
               h.hour + interval '1 hour',
               i.interval_s - (3600 - date_part('epoch', i.ts - h.hour)), false
        FROM inserted i
        CROSS JOIN LATERAL (SELECT date_bin('1 hour', i.ts, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour) h
        WHERE i.ts + i.interval_s * interval '1 second' > h.hour + interval '1 hour'
    ), gpu_hours AS MATERIALIZED (
        SELECT gpu_id, tenant_id, hour,
               COALESCE(sum(seconds * fraction) FILTER (WHERE allocated), 0) AS allocated_s,
               COALESCE(sum(seconds * fraction * util_pct / 100)
                        FILTER (WHERE allocated AND fraction >= 1e-150 AND util_pct >= 1e-150),
                        0) AS busy_s,
               count(*) FILTER (WHERE starts) AS samples,
               COALESCE(max(fraction) FILTER (WHERE allocated), 0) AS peak,
               COALESCE(sum(seconds) FILTER (WHERE NOT holder_unknown), 0) AS reported_s
        FROM parts GROUP BY 1, 2, 3
    ), instants AS (
        SELECT tenant_id, hour, max(gpus) AS gpus
        FROM (SELECT i.tenant_id, date_bin('1 hour', i.ts, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour, i.ts, sum(i.fraction) AS gpus
              FROM inserted i WHERE i.allocated GROUP BY 1, 2, 3) held
        GROUP BY 1, 2
    ), tenant_hours AS (
        INSERT INTO metering_tenanthour AS t (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                              sample_count, peak_gpus, reported_s, peak_stale)
        SELECT s.tenant_id, s.hour, s.allocated_s, s.busy_s, s.samples, COALESCE(p.gpus, 0),
               s.reported_s, true
        FROM (SELECT tenant_id, hour, sum(allocated_s) AS allocated_s, sum(busy_s) AS busy_s,
                     sum(samples) AS samples, sum(reported_s) AS reported_s
              FROM gpu_hours GROUP BY tenant_id, hour) s
        LEFT JOIN instants p ON p.hour = s.hour AND p.tenant_id IS NOT DISTINCT FROM s.tenant_id
        ORDER BY COALESCE(s.tenant_id, 0), s.hour
        ON CONFLICT (hour, (COALESCE(tenant_id, 0))) DO UPDATE SET
            allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
            busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
            sample_count = t.sample_count + EXCLUDED.sample_count,
            peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus),
            reported_s = t.reported_s + EXCLUDED.reported_s,
            peak_stale = true
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
$$;
