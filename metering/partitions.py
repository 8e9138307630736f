"""Daily partitions of the raw sample table on PostgreSQL, so retention drops a day's table
instead of deleting millions of rows. SQLite keeps one table and deletes.

A DEFAULT partition catches samples of a day that has no partition yet (tests, backfills);
creating that day's partition later moves them out of it first.
"""

from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction

TABLE = "metering_usagesample"
DEFAULT = f"{TABLE}_default"

_known: set[date] = set()


def is_partitioned() -> bool:
    return connection.vendor == "postgresql"


def partition_name(day: date) -> str:
    return f"{TABLE}_p{day:%Y%m%d}"


def day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


def ensure_partitions(days: set[date]) -> None:
    """Create the daily partitions these UTC days need (each once per process)."""
    if not is_partitioned():
        return
    for day in sorted(days - _known):
        _create(day)
        _known.add(day)


def _create(day: date) -> None:
    name, (start, end) = partition_name(day), day_bounds(day)
    # pg_class read by a plain query sees what other sessions committed; to_regclass() may
    # answer from a catalog cache that is stale right after another session created the table.
    exists = "SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = %s AND relkind = 'r')"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(exists, [name])
        if cursor.fetchone()[0]:
            return
        # Serialise creators of the same day across processes.
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
        cursor.execute(exists, [name])
        if cursor.fetchone()[0]:
            return
        cursor.execute(
            f'CREATE TABLE "{name}" (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
        )
        # Samples of this day that arrived before its partition wait in the default partition;
        # move them, or attaching would be refused.
        cursor.execute(
            f'WITH moved AS (DELETE FROM "{DEFAULT}" WHERE ts >= %s AND ts < %s RETURNING *) '
            f'INSERT INTO "{name}" SELECT * FROM moved',
            [start, end],
        )
        cursor.execute(
            f'ALTER TABLE {TABLE} ATTACH PARTITION "{name}" FOR VALUES FROM (%s) TO (%s)',
            [start, end],
        )


def drop_before(cutoff: datetime) -> int:
    """Drop the partitions that end at or before `cutoff`; delete older rows from the default
    one. Returns the number of partitions dropped."""
    if not is_partitioned():
        return 0
    dropped = 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass AND c.relname LIKE %s",
            [TABLE, f"{TABLE}_p%"],
        )
        for (name,) in cursor.fetchall():
            day = datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m%d").date()
            if day_bounds(day)[1] <= cutoff:
                cursor.execute(f'DROP TABLE "{name}"')
                _known.discard(day)
                dropped += 1
        cursor.execute(f'DELETE FROM "{DEFAULT}" WHERE ts < %s', [cutoff])
    return dropped


def forget() -> None:
    """Forget which partitions exist (after a test database is rebuilt)."""
    _known.clear()


def settle(day: date) -> bool:
    """Rebuild the indexes of a finished day's partition: samples of many agents arrive
    interleaved and split index pages half full; rebuilt, the key index stores about 31 bytes
    a sample instead of 50-55. Concurrently (writes go on) when no transaction is open.
    Returns whether the partition exists."""
    if not is_partitioned():
        return False
    name = partition_name(day)
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = %s)", [name])
        if not cursor.fetchone()[0]:
            return False
        concurrently = " (CONCURRENTLY)" if connection.get_autocommit() else ""
        cursor.execute(f'REINDEX{concurrently} TABLE "{name}"')
    return True
