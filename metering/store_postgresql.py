"""Writing a batch to PostgreSQL.

Fresh samples (the common case) are COPYed straight into the sample table; a batch holding a
stored key (a retry) fails that COPY on the primary key and goes through a temporary staging
table instead, inserting with ON CONFLICT DO NOTHING. Either way the rollups get exactly the
inserted rows, from sums made here, in one statement.

Peaks stay exact under concurrent batches because the GPUs a tenant held at each instant are a
row of their own (TenantInstant): a batch adds to it under the row's lock and gets back the
total, which includes every batch committed before; an hour's peak is the greatest of those.
Rows and upserts are sorted, so concurrent batches lock rows in one order (no deadlocks).
"""

from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
from django.db import IntegrityError, connection, transaction

from metering import copy_binary, partitions
from metering.protocol import each_once, taken
from metering.store import COLUMNS, READING, batch_sums

STAGING = """
CREATE TEMPORARY TABLE IF NOT EXISTS ingest_staging (
    idx integer, gpu_id integer, ts timestamptz, node_id bigint, tenant_id bigint,
    interval_s smallint, allocated boolean, fraction float8, util_pct float8,
    mem_used_mib integer, power_w float8, temp_c smallint, owner jsonb
) ON COMMIT DELETE ROWS
"""

# Sorted inserts and upserts: two batches always lock rows in the same order (no deadlocks).
DIRECT = f"COPY metering_usagesample ({', '.join(COLUMNS[1:])}) FROM STDIN (FORMAT BINARY)"
STAGED = f"COPY ingest_staging ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)"
INSERT_STAGED = f"""
INSERT INTO metering_usagesample ({", ".join(COLUMNS[1:])})
SELECT {", ".join(COLUMNS[1:])} FROM ingest_staging ORDER BY ts, gpu_id
ON CONFLICT DO NOTHING
RETURNING gpu_id, ts
"""

# The sums of new samples added to the rollups, from arrays, in one statement.
ADD_SUMS = """
WITH inst AS (
    INSERT INTO metering_tenantinstant AS t (tenant_id, ts, gpus)
    SELECT * FROM unnest(%(i_tenant)s::bigint[], %(i_ts)s::timestamptz[], %(i_gpus)s::float8[])
    ON CONFLICT (ts, (COALESCE(tenant_id, 0))) DO UPDATE SET gpus = t.gpus + EXCLUDED.gpus
    RETURNING tenant_id, date_trunc('hour', ts, 'UTC') AS hour, gpus
), peaks AS (
    SELECT tenant_id, hour, max(gpus) AS gpus FROM inst GROUP BY tenant_id, hour
), th AS (
    INSERT INTO metering_tenanthour AS t (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                          sample_count, peak_gpus, reported_s)
    SELECT s.tenant_id, s.hour, s.alloc_s, s.busy_s, s.n, COALESCE(p.gpus, 0), s.reported_s
    FROM unnest(%(t_tenant)s::bigint[], %(t_hour)s::timestamptz[], %(t_alloc)s::float8[],
                %(t_busy)s::float8[], %(t_n)s::int[], %(t_rep)s::float8[]) WITH ORDINALITY
         AS s(tenant_id, hour, alloc_s, busy_s, n, reported_s, position)
    LEFT JOIN peaks p ON p.hour = s.hour AND p.tenant_id IS NOT DISTINCT FROM s.tenant_id
    ORDER BY s.position
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
SELECT * FROM unnest(%(g_gpu)s::int[], %(g_tenant)s::bigint[], %(g_hour)s::timestamptz[],
                     %(g_alloc)s::float8[], %(g_busy)s::float8[], %(g_n)s::int[],
                     %(g_peak)s::float8[], %(g_rep)s::float8[])
ON CONFLICT (hour, gpu_id, (COALESCE(tenant_id, 0))) DO UPDATE SET
    allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
    busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
    sample_count = t.sample_count + EXCLUDED.sample_count,
    peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus),
    reported_s = t.reported_s + EXCLUDED.reported_s
"""

# Staged samples whose key is stored with other values (run only when some were not inserted;
# a fresh statement, so it sees what concurrent batches committed meanwhile).
CONFLICTS = f"""
SELECT s.idx FROM ingest_staging s
JOIN metering_usagesample u ON u.gpu_id = s.gpu_id AND u.ts = s.ts
WHERE ({", ".join(f"u.{c}" for c in READING)}) IS DISTINCT FROM
      ({", ".join(f"s.{c}" for c in READING)})
"""


TYPES = ["int4", "int4", "timestamptz", "int8", "int8", "int2", "bool", "float8", "float8",
         "int4", "float8", "int2", "jsonb"]


def write(columns: list, finish: Callable[[], None]) -> tuple[int, list[int]]:
    """Store the batch (store.COLUMNS); returns how many samples were new and the batch indexes
    of conflicts. `finish` runs last inside the batch's transaction."""
    partitions.ensure_partitions({ts.astimezone(UTC).date() for ts in set(columns[2])})
    # By (ts, gpu id), the order in which agents send a batch: sorting one costs a single pass
    # and reordering its columns nothing. Any one order for all batches avoids deadlocks.
    keys = list(zip(columns[2], columns[1], strict=True))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    if order != list(range(len(keys))):
        columns = taken(columns, order)
    try:
        return _write(columns, finish, staged=False)
    except IntegrityError as error:
        if not isinstance(error.__cause__, psycopg.errors.UniqueViolation):
            raise
    # A stored key (a retry): the direct COPY and all of its transaction were rolled back
    # (cheaper in the common case than a savepoint around every COPY); go through staging.
    return _write(columns, finish, staged=True)


def _write(columns: list, finish: Callable[[], None], *, staged: bool
           ) -> tuple[int, list[int]]:
    # The raw psycopg cursor bypasses Django's error translation; restore it, so that a lost
    # connection or a deadlock reaches the view as django.db.OperationalError (a 503).
    with transaction.atomic(), connection.cursor() as cursor, connection.wrap_database_errors:
        raw = cursor.cursor
        if staged:
            new, conflicts = _through_staging(raw, columns)
        else:
            _copy(raw, DIRECT, columns[1:], TYPES[1:])
            new, conflicts = columns, []
        if new[0]:
            _add_sums(raw, *batch_sums(new))
        finish()
    return len(new[0]), conflicts


def _copy(raw, statement: str, columns: list, types: list[str]) -> None:
    """Binary COPY (PostgreSQL reads binary values faster than text), formatted a column at a
    time (metering.copy_binary) and sent in one piece."""
    data = copy_binary.rows(columns, types)
    with raw.copy(statement) as copy:
        copy.write(data)


def _through_staging(raw, columns: list) -> tuple[list, list[int]]:
    # The temporary table belongs to the database session, which a restart or a dropped
    # connection replaces under Django's feet: ask for it every time (retries are rare).
    raw.execute(STAGING)
    # Emptied at every commit; emptied here too for a caller that batches in one transaction.
    raw.execute("DELETE FROM ingest_staging")
    _copy(raw, STAGED, columns, TYPES)
    raw.execute(INSERT_STAGED)
    inserted = set(raw.fetchall())
    fresh = [k for k, key in enumerate(zip(columns[1], columns[2], strict=True))
             if key in inserted]
    conflicts = []
    if len(fresh) < len(columns[0]):
        raw.execute(CONFLICTS)
        conflicts = [index for (index,) in raw.fetchall()]
    return taken(columns, fresh), conflicts


def _add_sums(raw, by_tenant: dict, by_gpu: dict, instants: dict) -> None:
    """Add a batch's sums to the rollups in one statement (arrays in, sorted upserts).

    A server-side prepared statement: Django's cursors bind parameters into the text, which
    PostgreSQL would parse and plan on every batch (about 15% of its time per batch)."""
    tenant_keys = sorted(by_tenant, key=lambda key: (key[0] or 0, key[1]))
    gpu_keys = sorted(by_gpu, key=lambda key: (key[0], key[1] or 0, key[2]))
    instant_keys = sorted(instants, key=lambda key: (key[0] or 0, key[1]))
    params = {name: _array(values) for name, values in {
        "i_tenant": [key[0] for key in instant_keys], "i_ts": [key[1] for key in instant_keys],
        "i_gpus": [instants[key] for key in instant_keys],
        "t_tenant": [key[0] for key in tenant_keys], "t_hour": [key[1] for key in tenant_keys],
        "t_alloc": [by_tenant[key].allocated_gpu_s for key in tenant_keys],
        "t_busy": [by_tenant[key].busy_gpu_s for key in tenant_keys],
        "t_n": [by_tenant[key].sample_count for key in tenant_keys],
        "t_rep": [by_tenant[key].reported_s for key in tenant_keys],
        "g_gpu": [key[0] for key in gpu_keys], "g_tenant": [key[1] for key in gpu_keys],
        "g_hour": [key[2] for key in gpu_keys],
        "g_alloc": [by_gpu[key].allocated_gpu_s for key in gpu_keys],
        "g_busy": [by_gpu[key].busy_gpu_s for key in gpu_keys],
        "g_n": [by_gpu[key].sample_count for key in gpu_keys],
        "g_peak": [by_gpu[key].peak_gpus for key in gpu_keys],
        "g_rep": [by_gpu[key].reported_s for key in gpu_keys],
    }.items()}
    with psycopg.Cursor(raw.connection) as cursor:
        cursor.execute(ADD_SUMS, params, prepare=True)


def _array(values: list) -> str:
    """A PostgreSQL array literal: one string parameter instead of a list that the driver
    would quote element by element."""
    if values and isinstance(values[0], datetime):  # few distinct: each formatted once
        return "{" + ",".join(each_once(lambda v: f'"{v.isoformat()}"', values)) + "}"
    if None in values:
        return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"
    return "{" + ",".join(map(repr, values)) + "}"
