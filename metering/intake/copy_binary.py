"""PostgreSQL's binary COPY format for a batch given as columns.

psycopg's Copy.write_row formats one row per Python call, and its jsonb dumper encodes every
owner again; here a struct packer is mapped over the columns, so the per-row loop runs in C,
and each distinct owner is encoded once. Only a column that holds NULLs is encoded value by
value. The format: a signature, then per row a field count and per field its length (-1 for
NULL) and its value in network byte order, then a trailer.
"""

import struct
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import repeat
from struct import Struct

import orjson

from metering.intake.columns import each_object_once, each_once

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # no flags, no header extension
TRAILER = b"\xff\xff"
NULL = b"\xff\xff\xff\xff"
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's timestamps count from here
MICROSECOND = timedelta(microseconds=1)
JSONB_VERSION = b"\x01"

# Each fixed-width type: its struct code and its width in bytes.
FIXED = {"bool": ("?", 1), "int2": ("h", 2), "int4": ("i", 4), "int8": ("q", 8),
         "float4": ("f", 4), "float8": ("d", 8), "timestamptz": ("q", 8)}


def rows(columns: Sequence[Sequence], types: Sequence[str]) -> bytes:
    """The COPY data of the rows whose columns these are (all of one length), one type name
    per column: a key of FIXED, or "jsonb". Timestamps must be timezone-aware."""
    count = len(columns[0]) if columns else 0
    columns = [_microseconds(values) if kind == "timestamptz" else values
               for values, kind in zip(columns, types, strict=True)]
    try:  # Most batches hold no NULL: looking for one costs more than packing does.
        parts = _parts(columns, types, count, nulls=False)
    except struct.error:  # a NULL (or a value out of range) where none was looked for
        parts = _parts(columns, types, count, nulls=True)
    # Row by row, each part's piece in turn: interleaved by slice assignment, in C.
    pieces = [b""] * (count * len(parts))
    for k, part in enumerate(parts):
        pieces[k::len(parts)] = part
    return SIGNATURE + b"".join(pieces) + TRAILER


def _parts(columns: list, types: Sequence[str], count: int, *, nulls: bool
           ) -> list[list[bytes]]:
    """Each part of a row, row by row: runs of fixed-width fields packed together (the first
    one led by the row's field count), and each column that holds NULLs (when `nulls` says to
    look) or jsonb."""
    parts = []
    fmt, args = ">h", [repeat(len(columns), count)]  # a run of fixed-width fields, no NULLs
    for values, kind in zip(columns, types, strict=True):
        # A bool is packed from any value, None included: always looked at.
        if kind == "jsonb" or ((nulls or kind == "bool") and None in values):
            if args:
                parts.append(_packed(fmt, args))
                fmt, args = ">", []
            parts.append(_jsonb(values) if kind == "jsonb" else _nullable(values, kind))
        else:
            code, width = FIXED[kind]
            fmt += "i" + code
            args += (repeat(width), values)
    if args:
        parts.append(_packed(fmt, args))
    return parts


def _packed(fmt: str, args: list) -> list[bytes]:
    """A run of fields for every row: one C call a row packs their lengths and values."""
    return list(map(Struct(fmt).pack, *args))


def _microseconds(values: Sequence) -> list[int | None]:
    """Each timestamp as microseconds since EPOCH (a batch has few distinct ones)."""
    return each_once(lambda value: None if value is None else (value - EPOCH) // MICROSECOND,
                     values)


def _nullable(values: Sequence, kind: str) -> list[bytes]:
    code, width = FIXED[kind]
    pack = Struct(">i" + code).pack
    return [NULL if value is None else pack(width, value) for value in values]


def _jsonb(values: Sequence) -> list[bytes]:
    """jsonb fields; one object (equal owners share a dict) is encoded once."""
    return each_object_once(_jsonb_field, values)


def _jsonb_field(value) -> bytes:
    if value is None:
        return NULL
    text = orjson.dumps(value)
    return (len(text) + 1).to_bytes(4, "big") + JSONB_VERSION + text
