"""Storing a batch of samples: GPUs registered, usage attributed, rollups kept exact.

PostgreSQL: binary COPY into a temporary staging table, then one statement that inserts the
samples (ON CONFLICT DO NOTHING, so a resent sample counts once) and adds exactly the inserted
ones to the rollups. SQLite: the same rules, row by row; SQLite runs one writer at a time.

Peaks stay exact under concurrent batches because the GPUs held at each instant are a row of
their own (TenantInstant): a batch adds to it under the row's lock and gets back the total, which
includes every batch committed before; the hour's peak is the greatest of those totals.
"""

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import repeat

import orjson
import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from psycopg.types.json import set_json_dumps

from metering import partitions, protocol
from metering.attribution import Attributor, Rule
from metering.models import AttributionRule, Gpu, Node
from metering.usage import floor_hour, recount

GPU_CACHE_SECONDS = 60
COLUMNS = ("idx", "gpu_id", "ts", "node_id", "tenant_id", "interval_s", "allocated", "fraction",
           "util_pct", "mem_used_mib", "power_w", "temp_c", "owner")
READING = ("interval_s", "allocated", "fraction", "util_pct", "mem_used_mib", "power_w",
           "temp_c", "owner")


@dataclass
class Result:
    accepted: int
    duplicates: int
    rejected: list[dict]

    def as_dict(self) -> dict:
        return {"accepted": self.accepted, "duplicates": self.duplicates,
                "rejected": self.rejected}


def ingest(node: Node, envelope: protocol.Envelope, *, now: datetime) -> Result:
    oldest = now - timedelta(days=settings.RAW_RETENTION_DAYS)
    batch, rejected, repeats = protocol.samples(envelope.samples, now, oldest)
    latest = {uuid: (index, model, memory) for uuid, index, model, memory in zip(
        batch.gpu_uuid, batch.gpu_index, batch.model, batch.mem_total_mib, strict=True)}
    gpu_ids = register_gpus(node, latest, now)
    ids = [gpu_ids.get(uuid) for uuid in batch.gpu_uuid]
    if None in ids:
        keep = [k for k, gpu_id in enumerate(ids) if gpu_id is not None]
        rejected.extend(
            {"index": batch.index[k], "error": (
                f"node mismatch: {batch.gpu_uuid[k]} is registered to another node")}
            for k, gpu_id in enumerate(ids) if gpu_id is None)
        batch, ids = batch.keep(keep), [ids[k] for k in keep]
    rows = list(zip(batch.index, ids, batch.ts, repeat(node.pk), _tenants(batch.owner, node),
                    batch.interval_s, batch.allocated, batch.fraction, batch.util_pct,
                    batch.mem_used_mib, batch.power_w, batch.temp_c, batch.owner, strict=False))
    if rows:
        write = _write_postgresql if connection.vendor == "postgresql" else _write_sqlite
        inserted, conflicts = write(rows, node, envelope, now)
    else:
        inserted, conflicts = 0, []
        _seen(node, envelope, now)
    rejected.extend({"index": index, "error": (
        "conflict: a different sample is already stored for this gpu_uuid and ts")}
        for index in conflicts)
    rejected.sort(key=lambda item: item["index"])
    return Result(inserted, repeats + len(rows) - inserted - len(conflicts), rejected)


def _tenants(owners: list, node: Node) -> list[int | None]:
    """The tenant of each sample; equal owners (one shared dict) are attributed once."""
    attributor = _attributor()
    known: dict[int, int | None] = {}
    out = []
    for owner in owners:
        key = id(owner)
        if key not in known:
            known[key] = attributor.tenant_for(owner, node.name, node.default_tenant_id)
        out.append(known[key])
    return out


RULES_SECONDS = 5
_rules: list = [None, 0.0]  # the attributor and when it was built


def _attributor() -> Attributor:
    """The rules as of at most RULES_SECONDS ago: one query per few seconds, not per batch.
    A rule saved in this process applies at once (forget_rules); elsewhere within seconds."""
    attributor, built = _rules
    if attributor is None or time.monotonic() - built > RULES_SECONDS:
        attributor = Attributor(
            Rule(*row) for row in
            AttributionRule.objects.values_list("tenant_id", "field", "value", "priority")
        )
        _rules[:] = [attributor, time.monotonic()]
    return attributor


def forget_rules(**_signal) -> None:
    _rules[:] = [None, 0.0]


SEEN_EVERY = 10  # seconds: how stale "last seen" may be; the UPDATE is skipped in between
_last_seen: dict[int, float] = {}


def _seen(node: Node, envelope: protocol.Envelope, now: datetime) -> None:
    """Last seen, agent version and dropped samples: the batch transaction's last statement,
    so it costs no commit of its own and holds the node's row only at the very end. Skipped
    while nothing changed and the stored time is less than SEEN_EVERY seconds old."""
    reported = envelope.dropped_samples
    clock = time.monotonic()
    if (reported == node.dropped_samples_reported
            and envelope.agent_version == node.agent_version
            and clock - _last_seen.get(node.pk, -SEEN_EVERY) < SEEN_EVERY):
        return
    # A total below the last one means the agent restarted and counts from zero again.
    Node.objects.filter(pk=node.pk).update(
        last_seen_at=now,
        agent_version=envelope.agent_version,
        dropped_samples=F("dropped_samples") + (
            reported - node.dropped_samples_reported
            if reported >= node.dropped_samples_reported else reported),
        dropped_samples_reported=reported,
    )
    _last_seen[node.pk] = clock


# uuid -> (gpu id, node id, index, model, memory, cached at): GPUs rarely change, and most
# batches then need no GPU query at all.
_gpus: dict[str, tuple[int, int, int | None, str, int | None, float]] = {}


def register_gpus(node: Node, latest: dict[str, tuple], now: datetime) -> dict[str, int]:
    """GPU ids by uuid for this node's GPUs, given each one's latest (index, model, memory);
    new GPUs are registered and changed ones updated. A GPU registered to another node is
    left out (its samples are rejected)."""
    clock = time.monotonic()
    stale = [uuid for uuid, seen in latest.items()
             if uuid not in _gpus or clock - _gpus[uuid][5] > GPU_CACHE_SECONDS
             or _changed(_gpus[uuid][2:5], seen)]
    if stale:
        _refresh(node, {uuid: latest[uuid] for uuid in stale}, now, clock)
    return {uuid: _gpus[uuid][0] for uuid in latest if _gpus[uuid][1] == node.pk}


def _changed(stored: tuple, seen: tuple) -> dict[str, object]:
    """The fields to update: what the agent reports differently (it may omit any of them)."""
    return {name: new for name, old, new in zip(("index", "model", "memory_total_mib"), stored,
                                                seen, strict=True)
            if new is not None and new != old}


def _refresh(node: Node, latest: dict[str, tuple], now: datetime, clock: float) -> None:
    known = {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=list(latest))}
    new = [Gpu(uuid=uuid, node=node, index=index, model=model or "", memory_total_mib=memory,
               first_seen_at=now, last_seen_at=now)
           for uuid, (index, model, memory) in latest.items() if uuid not in known]
    if new:
        Gpu.objects.bulk_create(new, ignore_conflicts=True)
        known |= {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=[g.uuid for g in new])}
    seen = []
    for uuid, gpu in known.items():
        if gpu.node_id == node.pk:
            seen.append(gpu.pk)
            fields = _changed((gpu.index, gpu.model, gpu.memory_total_mib), latest[uuid])
            if fields:
                Gpu.objects.filter(pk=gpu.pk).update(**fields)
                for name, value in fields.items():
                    setattr(gpu, name, value)
        _gpus[uuid] = (gpu.pk, gpu.node_id, gpu.index, gpu.model, gpu.memory_total_mib, clock)
    Gpu.objects.filter(pk__in=seen).update(last_seen_at=now)


def forget_gpus() -> None:
    """Drop the process's GPU cache (tests rebuild the database under it)."""
    _gpus.clear()
    _last_seen.clear()
    forget_rules()


STAGING = """
CREATE TEMPORARY TABLE IF NOT EXISTS ingest_staging (
    idx integer, gpu_id integer, ts timestamptz, node_id bigint, tenant_id bigint,
    interval_s smallint, allocated boolean, fraction float8, util_pct float8,
    mem_used_mib integer, power_w float8, temp_c smallint, owner jsonb
) ON COMMIT DELETE ROWS
"""

# Sorted inserts and upserts: two batches always lock rows in the same order (no deadlocks).
STORE = """
WITH ins AS (
    INSERT INTO metering_usagesample (gpu_id, ts, node_id, tenant_id, interval_s, allocated,
                                      fraction, util_pct, mem_used_mib, power_w, temp_c, owner)
    SELECT gpu_id, ts, node_id, tenant_id, interval_s, allocated, fraction, util_pct,
           mem_used_mib, power_w, temp_c, owner
    FROM ingest_staging ORDER BY gpu_id, ts
    ON CONFLICT DO NOTHING
    RETURNING gpu_id, ts, tenant_id, allocated, fraction,
              date_trunc('hour', ts, 'UTC') AS hour,
              CASE WHEN allocated THEN interval_s * fraction ELSE 0 END AS alloc_s,
              CASE WHEN allocated THEN interval_s * fraction * COALESCE(util_pct, 0) / 100
                   ELSE 0 END AS busy_s
), inst AS (
    INSERT INTO metering_tenantinstant AS t (tenant_id, ts, gpus)
    SELECT tenant_id, ts, sum(fraction) FROM ins WHERE allocated
    GROUP BY tenant_id, ts ORDER BY COALESCE(tenant_id, 0), ts
    ON CONFLICT (ts, (COALESCE(tenant_id, 0))) DO UPDATE SET gpus = t.gpus + EXCLUDED.gpus
    RETURNING tenant_id, date_trunc('hour', ts, 'UTC') AS hour, gpus
), peaks AS (
    SELECT tenant_id, hour, max(gpus) AS gpus FROM inst GROUP BY tenant_id, hour
), th AS (
    INSERT INTO metering_tenanthour AS t (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                          sample_count, peak_gpus)
    SELECT s.tenant_id, s.hour, s.alloc_s, s.busy_s, s.n, COALESCE(p.gpus, 0)
    FROM (SELECT tenant_id, hour, sum(alloc_s) AS alloc_s, sum(busy_s) AS busy_s,
                 count(*) AS n FROM ins GROUP BY tenant_id, hour) s
    LEFT JOIN peaks p ON p.hour = s.hour AND p.tenant_id IS NOT DISTINCT FROM s.tenant_id
    ORDER BY COALESCE(s.tenant_id, 0), s.hour
    ON CONFLICT (hour, (COALESCE(tenant_id, 0))) DO UPDATE SET
        allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
        busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
        sample_count = t.sample_count + EXCLUDED.sample_count,
        peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus)
    RETURNING 1
), gh AS (
    INSERT INTO metering_gpuhour AS t (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                       sample_count, peak_gpus)
    SELECT gpu_id, tenant_id, hour, sum(alloc_s), sum(busy_s), count(*),
           COALESCE(max(fraction) FILTER (WHERE allocated), 0)
    FROM ins GROUP BY gpu_id, tenant_id, hour
    ORDER BY gpu_id, COALESCE(tenant_id, 0), hour
    ON CONFLICT (hour, gpu_id, (COALESCE(tenant_id, 0))) DO UPDATE SET
        allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
        busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
        sample_count = t.sample_count + EXCLUDED.sample_count,
        peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus)
    RETURNING 1
)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM th), (SELECT count(*) FROM gh)
"""

# Staged samples whose key is stored with other values (run only when some were not inserted;
# a fresh statement, so it sees what concurrent batches committed meanwhile).
DIRECT = f"COPY metering_usagesample ({', '.join(COLUMNS[1:])}) FROM STDIN (FORMAT BINARY)"
STAGED = f"COPY ingest_staging ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)"

# The sums of new samples, added to the rollups: the same upserts as in STORE, from arrays.
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
                                          sample_count, peak_gpus)
    SELECT s.tenant_id, s.hour, s.alloc_s, s.busy_s, s.n, COALESCE(p.gpus, 0)
    FROM unnest(%(t_tenant)s::bigint[], %(t_hour)s::timestamptz[], %(t_alloc)s::float8[],
                %(t_busy)s::float8[], %(t_n)s::int[]) WITH ORDINALITY
         AS s(tenant_id, hour, alloc_s, busy_s, n, position)
    LEFT JOIN peaks p ON p.hour = s.hour AND p.tenant_id IS NOT DISTINCT FROM s.tenant_id
    ORDER BY s.position
    ON CONFLICT (hour, (COALESCE(tenant_id, 0))) DO UPDATE SET
        allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
        busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
        sample_count = t.sample_count + EXCLUDED.sample_count,
        peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus)
    RETURNING 1
)
INSERT INTO metering_gpuhour AS t (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                   sample_count, peak_gpus)
SELECT * FROM unnest(%(g_gpu)s::int[], %(g_tenant)s::bigint[], %(g_hour)s::timestamptz[],
                     %(g_alloc)s::float8[], %(g_busy)s::float8[], %(g_n)s::int[],
                     %(g_peak)s::float8[])
ON CONFLICT (hour, gpu_id, (COALESCE(tenant_id, 0))) DO UPDATE SET
    allocated_gpu_s = t.allocated_gpu_s + EXCLUDED.allocated_gpu_s,
    busy_gpu_s = t.busy_gpu_s + EXCLUDED.busy_gpu_s,
    sample_count = t.sample_count + EXCLUDED.sample_count,
    peak_gpus = GREATEST(t.peak_gpus, EXCLUDED.peak_gpus)
"""

CONFLICTS = f"""
SELECT s.idx FROM ingest_staging s
JOIN metering_usagesample u ON u.gpu_id = s.gpu_id AND u.ts = s.ts
WHERE ({", ".join(f"u.{c}" for c in READING)}) IS DISTINCT FROM
      ({", ".join(f"s.{c}" for c in READING)})
"""


TYPES = ["int4", "int4", "timestamptz", "int8", "int8", "int2", "bool", "float8", "float8",
         "int4", "float8", "int2", "jsonb"]


def _copy_rows(raw, statement: str, rows: list[tuple], *, with_index: bool) -> None:
    """Binary COPY: PostgreSQL parses binary values faster than text, and with owners encoded
    by orjson (instead of the standard json module) it is the cheapest path on both sides."""
    set_json_dumps(orjson.dumps, context=raw)
    with raw.copy(statement) as copy:
        if with_index:
            copy.set_types(TYPES)
            for row in rows:
                copy.write_row(row)
        else:
            copy.set_types(TYPES[1:])
            for row in rows:
                copy.write_row(row[1:])


def _staging(cursor) -> None:
    """The temporary staging table, created once per connection. Only a creation outside any
    transaction is remembered: one inside a transaction (tests) may be rolled back with it."""
    if not getattr(connection, "gpuloans_staging", False):
        cursor.execute(STAGING)
        if not connection.in_atomic_block:
            connection.gpuloans_staging = True


def _write_postgresql(rows: list[tuple], node: Node, envelope: protocol.Envelope,
                      now: datetime) -> tuple[int, list[int]]:
    """Fresh samples (the common case) are COPYed straight into the sample table and their
    rollups added from sums made here; a batch holding a stored key (a retry) fails that COPY
    on the primary key and takes the staging path, which skips what is stored."""
    partitions.ensure_partitions({row[2].astimezone(UTC).date() for row in rows})
    rows = sorted(rows, key=lambda row: (row[1], row[2]))  # one lock order for every batch
    with connection.cursor() as cursor:
        _staging(cursor.cursor)
    with transaction.atomic(), connection.cursor() as cursor:
        raw = cursor.cursor
        try:
            with transaction.atomic():
                _copy_rows(raw, DIRECT, rows, with_index=False)
        except psycopg.errors.UniqueViolation:
            inserted, conflicts = _store_through_staging(raw, rows)
        else:
            inserted, conflicts = len(rows), []
            _add_sums(raw, *_sums(rows))
        _seen(node, envelope, now)
    return inserted, conflicts


def _store_through_staging(raw, rows: list[tuple]) -> tuple[int, list[int]]:
    _copy_rows(raw, STAGED, rows, with_index=True)
    raw.execute(STORE)
    inserted = raw.fetchone()[0]
    conflicts = []
    if inserted < len(rows):
        raw.execute(CONFLICTS)
        conflicts = [index for (index,) in raw.fetchall()]
    return inserted, conflicts


def _sums(rows: list[tuple]) -> tuple[dict, dict, dict]:
    """Rollup sums of rows known to be new: per (tenant, hour), per (GPU, tenant, hour), and
    the GPUs each tenant held at each instant."""
    samples = [(row[1], row[2], row[4], row[5], row[6], row[7], row[8]) for row in rows]
    by_tenant, by_gpu = recount(samples)
    instants: dict[tuple, float] = {}
    for _gpu, ts, tenant_id, _interval, allocated, fraction, _util in samples:
        if allocated:
            instants[(tenant_id, ts)] = instants.get((tenant_id, ts), 0.0) + fraction
    return by_tenant, by_gpu, instants


def _add_sums(raw, by_tenant: dict, by_gpu: dict, instants: dict) -> None:
    """Add a batch's sums to the rollups in one statement (arrays in, sorted upserts)."""
    tenant_keys = sorted(by_tenant, key=lambda key: (key[0] or 0, key[1]))
    gpu_keys = sorted(by_gpu, key=lambda key: (key[0], key[1] or 0, key[2]))
    instant_keys = sorted(instants, key=lambda key: (key[0] or 0, key[1]))
    raw.execute(ADD_SUMS, {name: _array(values) for name, values in {
        "i_tenant": [key[0] for key in instant_keys], "i_ts": [key[1] for key in instant_keys],
        "i_gpus": [instants[key] for key in instant_keys],
        "t_tenant": [key[0] for key in tenant_keys], "t_hour": [key[1] for key in tenant_keys],
        "t_alloc": [by_tenant[key].allocated_gpu_s for key in tenant_keys],
        "t_busy": [by_tenant[key].busy_gpu_s for key in tenant_keys],
        "t_n": [by_tenant[key].sample_count for key in tenant_keys],
        "g_gpu": [key[0] for key in gpu_keys], "g_tenant": [key[1] for key in gpu_keys],
        "g_hour": [key[2] for key in gpu_keys],
        "g_alloc": [by_gpu[key].allocated_gpu_s for key in gpu_keys],
        "g_busy": [by_gpu[key].busy_gpu_s for key in gpu_keys],
        "g_n": [by_gpu[key].sample_count for key in gpu_keys],
        "g_peak": [by_gpu[key].peak_gpus for key in gpu_keys],
    }.items()})


def _array(values: list) -> str:
    """A PostgreSQL array literal: one string parameter instead of a list that the driver
    would quote element by element."""
    return "{" + ",".join(
        "NULL" if v is None else f'"{v.isoformat()}"' if isinstance(v, datetime) else repr(v)
        for v in values) + "}"


def _write_sqlite(rows: list[tuple], node: Node, envelope: protocol.Envelope,
                  now: datetime) -> tuple[int, list[int]]:
    """The simple path: row by row inside one transaction (SQLite has one writer at a time)."""
    adapt = connection.ops.adapt_datetimefield_value
    insert = (f"INSERT INTO metering_usagesample ({', '.join(COLUMNS[1:])}) "
              f"VALUES ({', '.join(['%s'] * (len(COLUMNS) - 1))}) ON CONFLICT DO NOTHING")
    stored = (f"SELECT {', '.join(READING)} FROM metering_usagesample "
              "WHERE gpu_id = %s AND ts = %s")
    inserted, conflicts = [], []
    with transaction.atomic(), connection.cursor() as cursor:
        for row in rows:
            index, gpu_id, ts, *rest, owner = row
            cursor.execute(insert, [gpu_id, adapt(ts), *rest, json.dumps(owner) if owner else None])
            if cursor.rowcount == 1:
                inserted.append(row)
                continue
            cursor.execute(stored, [gpu_id, adapt(ts)])
            if _reading(cursor.fetchone()) != _reading(row[5:]):
                conflicts.append(index)
        _add_to_rollups(cursor, inserted)
        _seen(node, envelope, now)
    return len(inserted), conflicts


def _reading(values: tuple) -> tuple:
    """A stored or offered reading in one form: SQLite gives booleans as 0/1, owners as text."""
    *head, owner = values
    head[1] = bool(head[1])
    return (*head, json.loads(owner) if isinstance(owner, str) else owner)


def _add_to_rollups(cursor, rows: list[tuple]) -> None:
    adapt = connection.ops.adapt_datetimefield_value
    by_tenant, by_gpu, instants = _sums(rows)
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
            "sample_count, peak_gpus) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (hour, COALESCE(tenant_id, 0)) DO UPDATE SET "
            "allocated_gpu_s = allocated_gpu_s + excluded.allocated_gpu_s, "
            "busy_gpu_s = busy_gpu_s + excluded.busy_gpu_s, "
            "sample_count = sample_count + excluded.sample_count, "
            "peak_gpus = max(peak_gpus, excluded.peak_gpus)",
            [tenant_id, adapt(hour), sums.allocated_gpu_s, sums.busy_gpu_s, sums.sample_count,
             peaks.get((tenant_id, hour), 0.0)])
    for (gpu_id, tenant_id, hour), sums in by_gpu.items():
        cursor.execute(
            "INSERT INTO metering_gpuhour (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s, "
            "sample_count, peak_gpus) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (hour, gpu_id, COALESCE(tenant_id, 0)) DO UPDATE SET "
            "allocated_gpu_s = allocated_gpu_s + excluded.allocated_gpu_s, "
            "busy_gpu_s = busy_gpu_s + excluded.busy_gpu_s, "
            "sample_count = sample_count + excluded.sample_count, "
            "peak_gpus = max(peak_gpus, excluded.peak_gpus)",
            [gpu_id, tenant_id, adapt(hour), sums.allocated_gpu_s, sums.busy_gpu_s,
             sums.sample_count, sums.peak_gpus])
