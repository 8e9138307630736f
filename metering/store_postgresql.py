"""Writing a batch to PostgreSQL.

Fresh samples (the common case) are COPYed straight into the sample table, in one statement
that is its own transaction; a batch holding a stored key (a retry) fails that COPY on the
primary key and goes through a temporary staging table instead, inserting with ON CONFLICT DO
NOTHING. Either way the database adds exactly the inserted rows to the rollups, in the same
statement: a trigger on the sample table does (migration metering 0004, which says how).

Peaks stay exact under concurrent batches because the GPUs a tenant held at each instant are a
row of their own (TenantInstant): a batch adds to it under the row's lock and gets back the
total, which includes every batch committed before; an hour's peak is the greatest of those.
Rows and upserts are sorted, so concurrent batches lock rows in one order (no deadlocks).
"""

from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC

import psycopg
from django.db import IntegrityError, connection, transaction

from metering import copy_binary, partitions
from metering.protocol import taken
from metering.store import COLUMNS, READING

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
    of conflicts. `finish` runs once the batch is stored: last in its transaction where it
    has one (a retry, or inside the caller's transaction), else on its own."""
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
    # A fresh batch with no transaction open (not even a caller's) is one statement, its own
    # transaction: the COPY and the rollups its trigger adds commit together, without a BEGIN
    # and a COMMIT of their own (two round trips a batch; about 0.25 ms of web worker and
    # database time). A stored key fails the whole statement.
    alone = not staged and connection.get_autocommit()
    # The raw psycopg cursor bypasses Django's error translation; restore it, so that a lost
    # connection or a deadlock reaches the view as django.db.OperationalError (a 503).
    with (
        nullcontext() if alone else transaction.atomic(),
        connection.cursor() as cursor,
        connection.wrap_database_errors,
    ):
        raw = cursor.cursor
        if staged:
            inserted, conflicts = _through_staging(raw, columns)
        else:
            _copy(raw, DIRECT, columns[1:], TYPES[1:])
            inserted, conflicts = len(columns[0]), []
        finish()
    return inserted, conflicts


def _copy(raw, statement: str, columns: list, types: list[str]) -> None:
    """Binary COPY (PostgreSQL reads binary values faster than text), formatted a column at a
    time (metering.copy_binary) and sent in one piece."""
    data = copy_binary.rows(columns, types)
    with raw.copy(statement) as copy:
        copy.write(data)


def _through_staging(raw, columns: list) -> tuple[int, list[int]]:
    """How many samples were new, and the batch indexes of conflicts."""
    # The temporary table belongs to the database session, which a restart or a dropped
    # connection replaces under Django's feet: ask for it every time (retries are rare).
    raw.execute(STAGING)
    # Emptied at every commit; emptied here too for a caller that batches in one transaction.
    raw.execute("DELETE FROM ingest_staging")
    _copy(raw, STAGED, columns, TYPES)
    raw.execute(INSERT_STAGED)
    inserted = raw.rowcount
    conflicts = []
    if inserted < len(columns[0]):
        raw.execute(CONFLICTS)
        conflicts = [index for (index,) in raw.fetchall()]
    return inserted, conflicts
