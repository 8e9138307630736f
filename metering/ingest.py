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

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

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
    valid, rejected, repeats = protocol.samples(envelope.samples, now, oldest)
    gpu_ids = register_gpus(node, valid, now)
    attributor = Attributor(
        Rule(*row) for row in
        AttributionRule.objects.values_list("tenant_id", "field", "value", "priority")
    )
    rows = []
    for sample in valid:
        gpu_id = gpu_ids.get(sample.gpu_uuid)
        if gpu_id is None:
            rejected.append({"index": sample.index, "error": (
                f"node mismatch: {sample.gpu_uuid} is registered to another node")})
            continue
        tenant_id = attributor.tenant_for(sample.owner, node.name, node.default_tenant_id)
        rows.append((sample.index, gpu_id, sample.ts, node.pk, tenant_id, sample.interval_s,
                     sample.allocated, sample.fraction, sample.util_pct, sample.mem_used_mib,
                     sample.power_w, sample.temp_c, sample.owner))
    if rows:
        write = _write_postgresql if connection.vendor == "postgresql" else _write_sqlite
        inserted, conflicts = write(rows)
    else:
        inserted, conflicts = 0, []
    rejected.extend({"index": index, "error": (
        "conflict: a different sample is already stored for this gpu_uuid and ts")}
        for index in conflicts)
    rejected.sort(key=lambda item: item["index"])
    _seen(node, envelope, now)
    return Result(inserted, repeats + len(rows) - inserted - len(conflicts), rejected)


def _seen(node: Node, envelope: protocol.Envelope, now: datetime) -> None:
    """Last seen, agent version and dropped samples: one short UPDATE after the batch commits,
    so batches of one node do not queue on its row."""
    reported = envelope.dropped_samples
    # A total below the last one means the agent restarted and counts from zero again.
    Node.objects.filter(pk=node.pk).update(
        last_seen_at=now,
        agent_version=envelope.agent_version,
        dropped_samples=F("dropped_samples") + (
            reported - node.dropped_samples_reported
            if reported >= node.dropped_samples_reported else reported),
        dropped_samples_reported=reported,
    )


# uuid -> (gpu id, node id, index, model, memory, cached at): GPUs rarely change, and most
# batches then need no GPU query at all.
_gpus: dict[str, tuple[int, int, int | None, str, int | None, float]] = {}


def register_gpus(node: Node, samples: list[protocol.Sample], now: datetime) -> dict[str, int]:
    """GPU ids by uuid for this node's samples, registering new GPUs and updating changed ones.
    A GPU registered to another node is left out (its samples are rejected)."""
    latest = {sample.gpu_uuid: sample for sample in samples}
    clock = time.monotonic()
    stale = [uuid for uuid in latest
             if uuid not in _gpus or clock - _gpus[uuid][5] > GPU_CACHE_SECONDS
             or _changed(_gpus[uuid], latest[uuid])]
    if stale:
        _refresh(node, {uuid: latest[uuid] for uuid in stale}, now, clock)
    return {uuid: _gpus[uuid][0] for uuid in latest if _gpus[uuid][1] == node.pk}


def _changed(cached: tuple, sample: protocol.Sample) -> bool:
    _id, _node, index, model, memory, _at = cached
    return ((sample.gpu_index is not None and sample.gpu_index != index)
            or (sample.model is not None and sample.model != model)
            or (sample.mem_total_mib is not None and sample.mem_total_mib != memory))


def _refresh(node: Node, samples: dict[str, protocol.Sample], now: datetime, clock: float):
    known = {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=list(samples))}
    new = [Gpu(uuid=uuid, node=node, index=s.gpu_index, model=s.model or "",
               memory_total_mib=s.mem_total_mib, first_seen_at=now, last_seen_at=now)
           for uuid, s in samples.items() if uuid not in known]
    if new:
        Gpu.objects.bulk_create(new, ignore_conflicts=True)
        known |= {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=[g.uuid for g in new])}
    for uuid, gpu in known.items():
        sample = samples[uuid]
        if gpu.node_id == node.pk:
            fields = {"last_seen_at": now}
            if sample.gpu_index is not None and sample.gpu_index != gpu.index:
                fields["index"] = sample.gpu_index
            if sample.model is not None and sample.model != gpu.model:
                fields["model"] = sample.model
            if sample.mem_total_mib is not None and sample.mem_total_mib != gpu.memory_total_mib:
                fields["memory_total_mib"] = sample.mem_total_mib
            Gpu.objects.filter(pk=gpu.pk).update(**fields)
            for name, value in fields.items():
                setattr(gpu, name, value)
        _gpus[uuid] = (gpu.pk, gpu.node_id, gpu.index, gpu.model, gpu.memory_total_mib, clock)


def forget_gpus() -> None:
    """Drop the process's GPU cache (tests rebuild the database under it)."""
    _gpus.clear()


STAGING = """
CREATE TEMPORARY TABLE IF NOT EXISTS ingest_staging (
    idx integer, gpu_id integer, ts timestamptz, node_id bigint, tenant_id bigint,
    interval_s smallint, allocated boolean, fraction float8, util_pct float8,
    mem_used_mib integer, power_w float8, temp_c smallint, owner jsonb
) ON COMMIT DELETE ROWS
"""
STAGING_TYPES = ["int4", "int4", "timestamptz", "int8", "int8", "int2", "bool", "float8",
                 "float8", "int4", "float8", "int2", "jsonb"]

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
CONFLICTS = f"""
SELECT s.idx FROM ingest_staging s
JOIN metering_usagesample u ON u.gpu_id = s.gpu_id AND u.ts = s.ts
WHERE ({", ".join(f"u.{c}" for c in READING)}) IS DISTINCT FROM
      ({", ".join(f"s.{c}" for c in READING)})
"""


def _write_postgresql(rows: list[tuple]) -> tuple[int, list[int]]:
    partitions.ensure_partitions({row[2].astimezone(UTC).date() for row in rows})
    with transaction.atomic(), connection.cursor() as cursor:
        raw = cursor.cursor
        # Every batch: a flag kept on the connection would outlive a rolled-back creation.
        raw.execute(STAGING)
        with raw.copy(f"COPY ingest_staging ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") \
                as copy:
            copy.set_types(STAGING_TYPES)
            for row in rows:
                copy.write_row(row)
        raw.execute(STORE)
        inserted = raw.fetchone()[0]
        conflicts = []
        if inserted < len(rows):
            raw.execute(CONFLICTS)
            conflicts = [index for (index,) in raw.fetchall()]
    return inserted, conflicts


def _write_sqlite(rows: list[tuple]) -> tuple[int, list[int]]:
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
    return len(inserted), conflicts


def _reading(values: tuple) -> tuple:
    """A stored or offered reading in one form: SQLite gives booleans as 0/1, owners as text."""
    *head, owner = values
    head[1] = bool(head[1])
    return (*head, json.loads(owner) if isinstance(owner, str) else owner)


def _add_to_rollups(cursor, rows: list[tuple]) -> None:
    adapt = connection.ops.adapt_datetimefield_value
    samples = [(row[1], row[2], row[4], row[5], row[6], row[7], row[8]) for row in rows]
    by_tenant, by_gpu = recount(samples)
    instants: dict[tuple, float] = {}
    for _gpu, ts, tenant_id, _interval, allocated, fraction, _util in samples:
        if allocated:
            instants[(tenant_id, ts)] = instants.get((tenant_id, ts), 0.0) + fraction
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
