"""Writing a batch to PostgreSQL.

Fresh samples (the common case: an agent's next batch, later than everything its devices
stored) are COPYed straight into the sample table, in one statement that is its own
transaction. The database checks and counts them in that statement: a trigger (migration
metering 0009) locks the batch's devices, refuses the statement if a sample overlaps another of
its device (SQLSTATE 23P01) and adds exactly the inserted rows to the rollups.

A batch that fails that way (a retry under stored keys, a backfill into a device's stored
span, overlapping samples) goes the checked path: in a transaction, the batch's devices are
locked in id order, the stored samples around the batch are read, each sample is decided on
its own (metering.intake.store.check: duplicate, conflict, overlap or new) and only the new ones are
COPYed, with the setting metering.checked telling the trigger they are checked already.
"""

from collections.abc import Callable
from contextlib import contextmanager, nullcontext

import psycopg
from django.db import IntegrityError, OperationalError, connection, transaction

from metering.intake import copy_binary, store
from metering.intake.columns import taken
from metering.intake.store import COLUMNS

STORED = COLUMNS[1:]
COPY = f"COPY metering_usagesample ({', '.join(STORED)}) FROM STDIN (FORMAT BINARY)"
TYPES = ["int4", "timestamptz", "int4", "int4", "int2", "bool", "float8", "float4", "int4",
         "float4", "int2", "bool"]
LOCK = "SELECT id FROM metering_gpu WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
# Tells the trigger that the statement's samples are checked already; switched back right after
# it, since a SET LOCAL lasts to the end of the transaction (not of a savepoint), and a caller's
# transaction may go on to insert more.
CHECKED, UNCHECKED = "SET LOCAL metering.checked = 'on'", "SET LOCAL metering.checked = 'off'"
# What makes the checked path necessary: a stored key, or the trigger's overlap refusal.
REFUSED = (psycopg.errors.UniqueViolation, psycopg.errors.ExclusionViolation)


def write(columns: list, names: list[str], finish: Callable[[], None],
          families: dict[int, int] | None = None) -> tuple[int, list[dict]]:
    """Store the batch (store.COLUMNS; `names` are the samples' device uuids); returns how
    many samples were new and the rejections. `finish` runs once the batch is stored: last in
    its transaction where it has one (the checked path, or inside the caller's transaction),
    else on its own. The batch's daily partitions exist already (metering.intake.ingest makes
    them before any transaction, so that other sessions see them at once)."""
    columns, names = store.in_time_order(columns, names)
    try:
        return _direct(columns, finish)
    except IntegrityError as error:
        if not isinstance(error.__cause__, REFUSED):
            raise
        if connection.needs_rollback:
            # The savepoint around the COPY could not be rolled back (the connection went away
            # at that moment): the caller's transaction is broken, and so is the batch's.
            raise OperationalError("the connection was lost rolling the batch back") from error
    # The direct COPY and all of its transaction were rolled back (cheaper in the common case
    # than a savepoint around every COPY): decide sample by sample.
    return _store_checked(columns, names, finish, families or {})


def _direct(columns: list, finish: Callable[[], None]) -> tuple[int, list[dict]]:
    # A fresh batch with no transaction open (not even a caller's) is one statement, its own
    # transaction: the COPY, the check and the rollups its trigger adds commit together,
    # without a BEGIN and a COMMIT of their own (two round trips a batch).
    alone = connection.get_autocommit()
    with _raw(alone=alone) as raw:
        _copy(raw, columns)
        finish()
    return len(columns[0]), []


def _store_checked(columns: list, names: list[str], finish: Callable[[], None],
                   families: dict[int, int]) -> tuple[int, list[dict]]:
    with _raw(alone=False) as raw:
        # The devices and their shared physical GPUs, in id order (as the trigger locks them).
        raw.execute(LOCK, [sorted(set(columns[1]) | set(families.values()))])
        stored, kin = store.stored_near(columns, families)
        decision = store.check(columns, stored, names, _same, families, kin)
        if decision.accepted:
            raw.execute(CHECKED)
            _copy(raw, taken(columns, decision.accepted))
            raw.execute(UNCHECKED)
        finish()
    return len(decision.accepted), decision.rejected


def _same(offered: tuple, stored: tuple) -> bool:
    """Readings as PostgreSQL stores them: util_pct and power_w in four bytes (and read back
    as their shortest decimal, so both sides go through four bytes)."""
    def kept(reading: tuple) -> tuple:
        interval, allocated, fraction, util, memory, power, temp, owner, unknown = reading
        return (interval, allocated, fraction, store.real(util), memory, store.real(power),
                temp, owner, unknown)

    return kept(offered) == kept(stored)


@contextmanager
def _raw(*, alone: bool):
    """The connection's psycopg cursor, inside a transaction unless the statement is `alone`
    (its own transaction), with Django's error translation restored, so that a lost
    connection or a deadlock reaches the view as django.db.OperationalError (a 503)."""
    with (
        nullcontext() if alone else transaction.atomic(),
        connection.cursor() as cursor,
        connection.wrap_database_errors,
    ):
        yield cursor.cursor


def _copy(raw, columns: list) -> None:
    """Binary COPY (PostgreSQL reads binary values faster than text), formatted a column at a
    time (metering.intake.copy_binary) and sent in one piece."""
    data = copy_binary.rows(columns[1:], TYPES)
    with raw.copy(COPY) as copy:
        copy.write(data)
