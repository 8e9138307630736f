"""The raw sample table, lean and checked: no device counted for more than its wall-clock time.

The row (PostgreSQL): the timestamp and the billed fraction in eight bytes, the GPU, tenant and
owner as four-byte ids (each distinct owner is stored once, in metering_owner), the other
readings in four bytes or less, columns in an order that leaves no alignment padding; which
node reported a sample is kept by the device's tenures (GpuTenure), not on every row. The only
index is the primary key, ordered (ts, gpu_id): samples arrive in time order, so it is
appended to and its pages stay full, and it serves time ranges too. About half the bytes of
the old row.

The trigger on the sample table (statement level, over the rows the statement really
inserted) now also:

- refuses a statement in which a sample overlaps another sample of its device, stored or in
  the statement, with SQLSTATE 23P01 (exclusion_violation). It locks the statement's devices'
  rows in id order (concurrent batches of one device queue there; no deadlocks) and compares
  each device's span in the statement with the span its stored samples cover
  (metering_gpu.covered_from/covered_until): a batch wholly after (or before) what is stored
  cannot overlap it, which is an agent's steady state, and only the statement's own samples
  are compared with each other. A statement inside a device's span (a backfill) is compared
  with the stored samples themselves. The ingestion path decides refused batches sample by
  sample under the same locks, and tells the trigger so with the setting metering.checked
  (metering.intake.store_postgresql);
- counts a sample in the hours it covers, in proportion (a 3600 s sample at 10:30 is half in
  each hour; its sample count goes to the hour it starts in);
- raises a tenant-hour's peak to what the statement alone shows at one timestamp and marks it
  stale: the exact peak (samples overlapping in time) is recounted from the raw samples by
  metering.peaks, every minute. The per-instant table the old peaks needed is gone.

The old rows are copied into the new table (owners to their ids); devices get the span their
samples cover.
"""

import hashlib
import json

import django.db.models.deletion
from django.db import migrations, models

import metering.models

TABLE = "metering_usagesample"
OWNER_KEYS = ("namespace", "pod", "container", "user", "account", "job")

COLUMNS = """
    "ts" timestamp with time zone NOT NULL,
    "fraction" double precision NOT NULL,
    "gpu_id" integer NOT NULL,
    "tenant_id" integer NULL,
    "owner_id" integer NULL,
    "mem_used_mib" integer NULL CHECK ("mem_used_mib" >= 0),
    "util_pct" real NULL,
    "power_w" real NULL,
    "interval_s" smallint NOT NULL CHECK ("interval_s" >= 0),
    "temp_c" smallint NULL,
    "allocated" boolean NOT NULL,
    CONSTRAINT "sample_interval_in_range" CHECK ("interval_s" >= 1 AND "interval_s" <= 3600),
    CONSTRAINT "sample_fraction_in_range" CHECK ("fraction" > 0.0 AND "fraction" <= 1.0),
    CONSTRAINT "sample_util_is_a_percentage"
        CHECK ("util_pct" IS NULL OR ("util_pct" >= 0.0 AND "util_pct" <= 100.0)),
    PRIMARY KEY ("ts", "gpu_id")
"""

HOUR_OF = "date_bin('1 hour', {ts}, TIMESTAMPTZ '2000-01-01 00:00+00')"

FUNCTION = f"""
CREATE OR REPLACE FUNCTION metering_add_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids integer[];
    firsts timestamptz[];
    lasts timestamptz[];
    backfill boolean;
BEGIN
    SELECT array_agg(gpu_id ORDER BY gpu_id), array_agg(first ORDER BY gpu_id),
           array_agg(last ORDER BY gpu_id)
      INTO ids, firsts, lasts
      FROM (SELECT gpu_id, min(ts) AS first,
                   max(ts + interval_s * interval '1 second') AS last
            FROM inserted GROUP BY gpu_id) spans;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- Each device's span grows to hold the statement's samples; the row is locked first, in
    -- id order (concurrent statements of one device queue here; no deadlocks), and the old
    -- span comes back: a statement inside it (a backfill) is looked at sample by sample.
    WITH spans AS (
        UPDATE metering_gpu g SET covered_from = LEAST(g.covered_from, s.first),
                                  covered_until = GREATEST(g.covered_until, s.last)
        FROM (SELECT id, covered_from, covered_until FROM metering_gpu
              WHERE id = ANY(ids) ORDER BY id FOR UPDATE) held
        JOIN unnest(ids, firsts, lasts) AS s(id, first, last) ON s.id = held.id
        WHERE g.id = held.id
        RETURNING s.first < held.covered_until AND s.last > held.covered_from AS inside
    )
    SELECT coalesce(bool_or(inside), false) INTO backfill FROM spans;
    IF coalesce(current_setting('metering.checked', true), '') <> 'on' THEN
        IF backfill THEN
            IF EXISTS (SELECT 1 FROM {TABLE} u JOIN inserted i ON u.gpu_id = i.gpu_id
                       WHERE u.ts >= (SELECT min(ts) FROM inserted) - interval '1 hour'
                         AND u.ts < (SELECT max(last) FROM unnest(lasts) AS l(last))
                         AND u.ts <> i.ts
                         AND u.ts < i.ts + i.interval_s * interval '1 second'
                         AND u.ts + u.interval_s * interval '1 second' > i.ts) THEN
                RAISE EXCEPTION 'a sample overlaps another sample of its device'
                    USING ERRCODE = 'exclusion_violation';
            END IF;
        ELSIF EXISTS (SELECT 1 FROM (SELECT ts, interval_s,
                                            lead(ts) OVER (PARTITION BY gpu_id ORDER BY ts)
                                            AS next
                                     FROM inserted) x
                      WHERE x.next < x.ts + x.interval_s * interval '1 second') THEN
            RAISE EXCEPTION 'samples of one device overlap in the statement'
                USING ERRCODE = 'exclusion_violation';
        END IF;
    END IF;

    WITH heads AS MATERIALIZED (
        SELECT i.gpu_id, i.tenant_id, i.ts, i.interval_s, i.allocated, i.fraction, i.util_pct,
               h.hour, least(i.interval_s::float8, 3600 - date_part('epoch', i.ts - h.hour))
               AS seconds
        FROM inserted i
        CROSS JOIN LATERAL (SELECT {HOUR_OF.format(ts="i.ts")} AS hour) h
    ), parts AS MATERIALIZED (
        SELECT gpu_id, tenant_id, ts, allocated, fraction, util_pct, hour, seconds,
               true AS starts
        FROM heads
        UNION ALL  -- the rest of a sample that runs into the next hour
        SELECT gpu_id, tenant_id, ts, allocated, fraction, util_pct, hour + interval '1 hour',
               interval_s - seconds, false
        FROM heads WHERE interval_s > seconds
    ), gpu_hours AS MATERIALIZED (
        SELECT gpu_id, tenant_id, hour,
               COALESCE(sum(seconds * fraction) FILTER (WHERE allocated), 0) AS allocated_s,
               COALESCE(sum(seconds * fraction * util_pct / 100)
                        FILTER (WHERE allocated AND fraction >= 1e-150 AND util_pct >= 1e-150),
                        0) AS busy_s,
               count(*) FILTER (WHERE starts) AS samples,
               COALESCE(max(fraction) FILTER (WHERE allocated), 0) AS peak,
               sum(seconds) AS reported_s
        FROM parts GROUP BY 1, 2, 3
    ), instants AS (
        SELECT tenant_id, hour, max(gpus) AS gpus
        FROM (SELECT tenant_id, hour, ts, sum(fraction) AS gpus FROM parts
              WHERE allocated AND starts GROUP BY 1, 2, 3) held
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
$$
"""

TRIGGER = f"""
CREATE TRIGGER metering_usagesample_rollups AFTER INSERT ON {TABLE}
REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION metering_add_rollups()
"""


def digest_sql(owner: str) -> str:
    """metering.models.Owner.digest_of, in SQL, of the jsonb expression `owner`."""
    text = " || chr(31) || ".join(f"'{key}=' || coalesce({owner}->>'{key}', '')"
                                  for key in OWNER_KEYS)
    return f"encode(sha256(convert_to({text}, 'UTF8')), 'hex')"


def digest(owner: dict) -> str:
    text = "\x1f".join(f"{key}={owner.get(key, '')}" for key in OWNER_KEYS)
    return hashlib.sha256(text.encode()).hexdigest()


def rebuild_postgresql(schema_editor) -> None:
    run = schema_editor.execute
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass ORDER BY 1", [TABLE])
        partitions = [name for (name,) in cursor.fetchall()]
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass", [TABLE])
        bounds = dict(cursor.fetchall())
    run(f"DROP TRIGGER IF EXISTS metering_usagesample_rollups ON {TABLE}")
    run(f"ALTER TABLE {TABLE} RENAME TO {TABLE}_old")
    for name in partitions:
        run(f'ALTER TABLE "{name}" RENAME TO "{name}_old"')
    run(f'ALTER INDEX IF EXISTS "{TABLE}_pkey" RENAME TO "{TABLE}_old_pkey"')
    run("ALTER INDEX IF EXISTS sample_ts RENAME TO sample_ts_old")
    run(f"CREATE TABLE {TABLE} ({COLUMNS}) PARTITION BY RANGE (ts)")
    for name in partitions:
        run(f'CREATE TABLE "{name}" PARTITION OF {TABLE} {bounds[name]}')
    run(f"""INSERT INTO metering_owner (digest, namespace, pod, container, "user", account, job)
            SELECT DISTINCT {digest_sql("owner")}, {", ".join(
                f"coalesce(owner->>'{key}', '')" for key in OWNER_KEYS)}
            FROM {TABLE}_old WHERE owner IS NOT NULL
            ON CONFLICT (digest) DO NOTHING""")
    run(f"""INSERT INTO {TABLE} (ts, fraction, gpu_id, tenant_id, owner_id, mem_used_mib,
                                 util_pct, power_w, interval_s, temp_c, allocated)
            SELECT s.ts, s.fraction, s.gpu_id, s.tenant_id, o.id, s.mem_used_mib, s.util_pct,
                   s.power_w, s.interval_s, s.temp_c, s.allocated
            FROM {TABLE}_old s LEFT JOIN metering_owner o ON o.digest = {digest_sql("s.owner")}
                                                        AND s.owner IS NOT NULL""")
    run(f"DROP TABLE {TABLE}_old CASCADE")
    run(FUNCTION)
    run(TRIGGER)


SQLITE_TABLE = f"""
CREATE TABLE "{TABLE}" (
    "ts" datetime NOT NULL, "fraction" real NOT NULL, "gpu_id" integer NOT NULL,
    "tenant_id" integer NULL, "owner_id" integer NULL,
    "mem_used_mib" integer unsigned NULL CHECK ("mem_used_mib" >= 0), "util_pct" real NULL,
    "power_w" real NULL, "interval_s" smallint unsigned NOT NULL CHECK ("interval_s" >= 0),
    "temp_c" smallint NULL, "allocated" bool NOT NULL,
    CONSTRAINT "sample_interval_in_range" CHECK ("interval_s" >= 1 AND "interval_s" <= 3600),
    CONSTRAINT "sample_fraction_in_range" CHECK ("fraction" > 0.0 AND "fraction" <= 1.0),
    CONSTRAINT "sample_util_is_a_percentage"
        CHECK ("util_pct" IS NULL OR ("util_pct" >= 0.0 AND "util_pct" <= 100.0)),
    PRIMARY KEY ("gpu_id", "ts")
)
"""


def rebuild_sqlite(schema_editor) -> None:
    run = schema_editor.execute
    run(f'ALTER TABLE "{TABLE}" RENAME TO "{TABLE}_old"')
    run("DROP INDEX IF EXISTS sample_ts")
    run(SQLITE_TABLE)
    run(f'CREATE INDEX "sample_ts" ON "{TABLE}" ("ts")')
    owners: dict[str, int] = {}
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'SELECT gpu_id, ts, tenant_id, owner, interval_s, allocated, fraction, '
                       f'util_pct, mem_used_mib, power_w, temp_c FROM "{TABLE}_old"')
        rows = cursor.fetchall()
        for row in rows:
            gpu_id, ts, tenant_id, owner, *rest = row
            owner_id = None
            if owner:
                owner = json.loads(owner) if isinstance(owner, str) else owner
                key = digest(owner)
                if key not in owners:
                    cursor.execute(
                        'INSERT INTO metering_owner (digest, namespace, pod, container, "user", '
                        "account, job) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [key, *(owner.get(k, "") for k in OWNER_KEYS)])
                    owners[key] = cursor.lastrowid
                owner_id = owners[key]
            interval_s, allocated, fraction, util, memory, power, temp = rest
            cursor.execute(
                f'INSERT INTO "{TABLE}" (ts, fraction, gpu_id, tenant_id, owner_id, '
                "mem_used_mib, util_pct, power_w, interval_s, temp_c, allocated) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [ts, fraction, gpu_id, tenant_id, owner_id, memory, util, power, interval_s,
                 temp, allocated])
    run(f'DROP TABLE "{TABLE}_old"')


def rebuild(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        rebuild_postgresql(schema_editor)
    else:
        rebuild_sqlite(schema_editor)
    covered_spans(schema_editor)


def covered_spans(schema_editor) -> None:
    """Each device's stored span: where the cheap overlap check starts from."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"""
            UPDATE metering_gpu g SET covered_from = s.first, covered_until = s.last
            FROM (SELECT gpu_id, min(ts) AS first,
                         max(ts + interval_s * interval '1 second') AS last
                  FROM {TABLE} GROUP BY gpu_id) s
            WHERE g.id = s.gpu_id""")
        return
    from datetime import datetime, timedelta

    from django.utils.dateparse import parse_datetime

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'SELECT gpu_id, ts, interval_s FROM "{TABLE}"')
        spans: dict[int, list[datetime]] = {}
        for gpu_id, ts, interval_s in cursor.fetchall():
            start = ts if isinstance(ts, datetime) else parse_datetime(ts)
            end = start + timedelta(seconds=interval_s)
            first, last = spans.get(gpu_id, (start, end))
            spans[gpu_id] = [min(first, start), max(last, end)]
        adapt = schema_editor.connection.ops.adapt_datetimefield_value
        for gpu_id, (first, last) in spans.items():
            cursor.execute("UPDATE metering_gpu SET covered_from = %s, covered_until = %s "
                           "WHERE id = %s", [adapt(first), adapt(last), gpu_id])


def first_tenures(apps, schema_editor):
    """A device's first tenure reaches back to the start of time: every sample stored before
    it moved is its first node's, late ones included (migration 0008 began them when the
    device was first seen)."""
    from datetime import UTC, datetime

    GpuTenure = apps.get_model("metering", "GpuTenure")
    first = (GpuTenure.objects.filter(gpu_id=models.OuterRef("gpu_id"))
             .order_by("since").values("pk")[:1])
    GpuTenure.objects.filter(pk=models.Subquery(first)).update(
        since=datetime(2000, 1, 1, tzinfo=UTC))


class Migration(migrations.Migration):
    dependencies = [("metering", "0008_devices")]

    operations = [
        migrations.CreateModel(
            name="Owner",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                ("namespace", models.CharField(blank=True, max_length=253, verbose_name="namespace")),
                ("pod", models.CharField(blank=True, max_length=253, verbose_name="pod")),
                ("container", models.CharField(blank=True, max_length=253, verbose_name="container")),
                ("user", models.CharField(blank=True, max_length=253, verbose_name="user")),
                ("account", models.CharField(blank=True, max_length=253, verbose_name="account")),
                ("job", models.CharField(blank=True, max_length=253, verbose_name="job")),
            ],
            options={"verbose_name": "owner", "verbose_name_plural": "owners"},
        ),
        migrations.AddField(
            model_name="gpu", name="covered_from",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="gpu", name="covered_until",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="tenanthour", name="peak_stale",
            field=models.BooleanField(db_default=False, default=False, editable=False),
        ),
        migrations.AddIndex(
            model_name="tenanthour",
            index=models.Index(condition=models.Q(("peak_stale", True)), fields=["hour"],
                               name="tenant_hour_peak_stale"),
        ),
        migrations.AlterField(
            model_name="tenanthour", name="peak_gpus",
            field=models.FloatField(default=0.0, help_text="Most GPUs allocated at one moment of the hour."),
        ),
        migrations.AlterField(
            model_name="gpuhour", name="peak_gpus",
            field=models.FloatField(default=0.0, help_text="Most GPUs allocated at one moment of the hour."),
        ),
        migrations.DeleteModel(name="TenantInstant"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="usagesample", name="sample_ts"),
                migrations.RemoveField(model_name="usagesample", name="node"),
                migrations.RemoveField(model_name="usagesample", name="owner"),
                migrations.AddField(
                    model_name="usagesample", name="owner",
                    field=models.ForeignKey(db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, to="metering.owner"),
                ),
                migrations.AlterField(model_name="usagesample", name="util_pct",
                                      field=metering.models.RealField(null=True)),
                migrations.AlterField(model_name="usagesample", name="power_w",
                                      field=metering.models.RealField(null=True)),
            ],
            database_operations=[migrations.RunPython(rebuild, migrations.RunPython.noop)],
        ),
        migrations.RunPython(first_tenures, migrations.RunPython.noop),
    ]
