"""metering.intake.copy_binary writes PostgreSQL's binary COPY format: byte for byte as the
format is documented, and read back by PostgreSQL as exactly the values given."""

import struct
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering.intake.copy_binary import SIGNATURE, TRAILER, rows
from metering.intake.store_postgresql import TYPES
from tests.tiers import examples

# The sample table's columns as the ingestion path COPYs them (store.COLUMNS less the index).
SAMPLE_TYPES = TYPES
TABLE = """CREATE TEMPORARY TABLE IF NOT EXISTS copied (
    gpu_id integer, ts timestamptz, tenant_id integer, owner_id integer, interval_s smallint,
    allocated boolean, fraction float8, util_pct real, mem_used_mib integer, power_w real,
    temp_c smallint, holder_unknown boolean)"""


def test_a_row_is_a_field_count_then_each_field_as_length_and_network_order_value():
    data = rows([[7, None], [True, False], [-2, 3]], ["int4", "bool", "int2"])
    assert data == (SIGNATURE
                    + b"\x00\x03" + b"\x00\x00\x00\x04\x00\x00\x00\x07"
                    + b"\x00\x00\x00\x01\x01" + b"\x00\x00\x00\x02\xff\xfe"
                    + b"\x00\x03" + b"\xff\xff\xff\xff"
                    + b"\x00\x00\x00\x01\x00" + b"\x00\x00\x00\x02\x00\x03"
                    + TRAILER)


def test_no_rows_is_the_signature_and_the_trailer():
    assert rows([[], []], ["int4", "float4"]) == SIGNATURE + TRAILER


def test_timestamps_count_microseconds_from_2000_in_utc():
    shanghai = timezone(timedelta(hours=8))
    data = rows([[datetime(2000, 1, 1, 8, 0, 0, 1, tzinfo=shanghai)]], ["timestamptz"])
    assert data == SIGNATURE + b"\x00\x01" + b"\x00\x00\x00\x08" + (1).to_bytes(8, "big") + TRAILER


def copied(columns: list) -> list[tuple]:
    """What PostgreSQL reads from our COPY data."""
    with connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute(TABLE)
        raw.execute("DELETE FROM copied")
        with raw.copy("COPY copied FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(rows(columns, SAMPLE_TYPES))
        raw.execute("SELECT * FROM copied")
        return raw.fetchall()


EXAMPLE = [
    (1, datetime(2026, 11, 30, 12, tzinfo=UTC), 9, 4, 60, True, 1.0, 37.5, 40_000, 350.25, 61,
     False),
    (2_147_483_647, datetime(2026, 11, 30, 20, 1, 2, 345678, tzinfo=timezone(timedelta(hours=8))),
     None, None, 1, False, 0.125, None, None, None, None, True),
    (3, datetime(2026, 11, 30, 12, tzinfo=UTC), 9, 4, 3600, True, 5e-324, 0.0, 0, 0.0, -100,
     False),
    (4, datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), 2**31 - 1, 5, 30, True, 1.0,
     100.0, 2_147_483_647, 1e5, 250, False),
]


@pytest.mark.postgresql
def test_postgresql_reads_back_every_value_and_null(db):
    assert copied([list(column) for column in zip(*EXAMPLE, strict=True)]) == EXAMPLE


def nullable(strategy):
    return st.one_of(st.none(), strategy)


def real(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


reals = st.floats(allow_nan=False, width=32)  # what four bytes hold exactly
sample_rows = st.lists(st.tuples(
    st.integers(-(2**31), 2**31 - 1),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                 timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))])),
    nullable(st.integers(-(2**31), 2**31 - 1)),
    nullable(st.integers(-(2**31), 2**31 - 1)),
    st.integers(-(2**15), 2**15 - 1),
    st.booleans(),
    st.floats(allow_nan=False),
    nullable(reals),
    nullable(st.integers(-(2**31), 2**31 - 1)),
    nullable(reals),
    nullable(st.integers(-(2**15), 2**15 - 1)),
    st.booleans(),
), min_size=1, max_size=20)


@pytest.mark.postgresql
@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample_rows)
def test_postgresql_reads_back_any_rows_exactly(db, examples):
    columns = [list(column) for column in zip(*examples, strict=True)]
    # A four-byte value comes back as its shortest decimal: compare it as four bytes keep it.
    reals = (7, 9)
    assert [tuple(real(v) if k in reals and v is not None else v for k, v in enumerate(row))
            for row in copied(columns)] == examples


def test_a_float4_column_is_packed_to_four_bytes():
    data = rows([[0.1]], ["float4"])
    assert data == SIGNATURE + b"\x00\x01" + b"\x00\x00\x00\x04" + struct.pack(">f", 0.1) + TRAILER
    assert real(0.1) != 0.1 and real(0.5) == 0.5
