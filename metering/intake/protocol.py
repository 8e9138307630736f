"""Agent protocol v1 (README, "APIs"): parsing and validation in plain code, no ORM, no serializers.

This is the hot path: a 500-sample batch is checked in well under a millisecond. A bad sample is
rejected with its index and reason and never costs its valid neighbours.
"""

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import orjson

from metering.intake.columns import Columns
from metering.models.samples import MAX_INTERVAL_S, MIN_INTERVAL_S

MAX_UUID = 96
MAX_TEXT = 253
OWNER_KEYS = frozenset(("namespace", "pod", "container", "user", "account", "job"))
FUTURE_SLACK = timedelta(minutes=5)
# Owner values may be numbers (job ids, uids); within 64 bits, so they read back as text.
OWNER_INT_MIN, OWNER_INT_MAX = -(2**63), 2**63 - 1
INT32 = 2**31 - 1
# The seconds a sample may cover (protocol v1); the database checks the same range.


class Oldest(NamedTuple):
    """The earliest time a batch's samples may start, and what sets it, for the refusal
    (metering.intake.ingest.oldest: raw retention, the back-fill horizon, the node's
    registration)."""

    at: datetime
    why: str  # "older than raw retention", "before node gpu-01 was registered", ...


class ProtocolError(Exception):
    """The whole request is refused: status and a message for the agent's log."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True)
class Sample:
    index: int
    gpu_uuid: str
    ts: datetime
    interval_s: int
    allocated: bool
    fraction: float
    util_pct: float | None
    mem_used_mib: int | None
    mem_total_mib: int | None
    power_w: float | None
    temp_c: int | None
    gpu_index: int | None
    model: str | None
    owner: dict[str, str] | None
    holder_unknown: bool  # the agent's scheduler source could not say who held the device
    parent_uuid: str | None  # a MIG instance's or replica's physical GPU, where the agent knows

    def same_reading(self, other: "Sample") -> bool:
        """Equal in everything a sample measures (what a resent sample must repeat)."""
        return (self.interval_s, self.allocated, self.fraction, self.util_pct,
                self.mem_used_mib, self.power_w, self.temp_c, self.owner,
                self.holder_unknown) == (
            other.interval_s, other.allocated, other.fraction, other.util_pct,
            other.mem_used_mib, other.power_w, other.temp_c, other.owner, other.holder_unknown)


@dataclass(frozen=True, slots=True)
class Envelope:
    """A batch's envelope. `samples` are the raw JSON objects, or, when `typed`
    (metering.intake.wire decoded the whole batch), checked structs, with `body` kept for the
    per-sample path."""

    node: str
    agent_version: str
    dropped_samples: int
    samples: list
    typed: bool = False
    body: bytes = b""


def is_text(value: str) -> bool:
    """Printable: no control characters, no NUL (which PostgreSQL cannot store) and no lone
    surrogates (which are not UTF-8)."""
    return value.isprintable()


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _not_json(error: Exception) -> str:
    """Where the body stops being JSON, in our words rather than the parser's."""
    if isinstance(error, UnicodeDecodeError):
        return f"body is not UTF-8 at byte {error.start}"
    if isinstance(error, json.JSONDecodeError):
        return f"body is not valid JSON at line {error.lineno}, column {error.colno}"
    if isinstance(error, RecursionError):
        return "body is not valid JSON: nested too deeply"
    return "body is not valid JSON"


def parse(body: bytes) -> Envelope:
    """The envelope of a batch, or ProtocolError(400) saying what is wrong with it."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        # orjson refuses integers beyond 64 bits; the standard parser reads them so that the
        # one sample holding such a number is rejected, not the whole batch.
        try:
            data = json.loads(body, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as error:
            raise ProtocolError(400, _not_json(error)) from None
    if not isinstance(data, dict):
        raise ProtocolError(400, "body must be a JSON object with node and samples")
    node = data.get("node")
    if not isinstance(node, str) or not node:
        raise ProtocolError(400, "node must be the node's name (a non-empty string)")
    version = data.get("agent_version", "")
    if not isinstance(version, str) or len(version) > 64 or not is_text(version):
        raise ProtocolError(
            400, "agent_version must be a string of at most 64 printable characters")
    dropped = data.get("dropped_samples", 0)
    if type(dropped) is not int or not 0 <= dropped <= 2**53:
        raise ProtocolError(400, "dropped_samples must be a non-negative integer")
    samples = data.get("samples")
    if not isinstance(samples, list):
        raise ProtocolError(400, "samples must be a list")
    return Envelope(node, version, dropped, samples)


class Invalid(Exception):
    pass


def _show(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(raw: dict, key: str, low: float, high: float, *, default=None,
            low_open: bool = False) -> float | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        raise Invalid(f"{key} must be a number")
    if value < low or value > high or (low_open and value == low):
        bounds = f"{low:g} < {key} <= {high:g}" if low_open else f"{low:g} to {high:g}"
        raise Invalid(f"{key} {_show(value)} is out of range ({bounds})")
    return float(value)


def _integer(raw: dict, key: str, low: int, high: int) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int:
        raise Invalid(f"{key} must be an integer")
    if not low <= value <= high:
        raise Invalid(f"{key} {_show(value)} is out of range ({low} to {high})")
    return value


def _text(raw: dict, key: str, limit: int) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{key} must be a string")
    if len(value) > limit:
        raise Invalid(f"{key} is longer than {limit} characters")
    if not is_text(value):
        raise Invalid(f"{key} must be printable text")
    return value


def owner(value: object) -> dict[str, str] | None:
    """The owner as stored: known keys only, numbers as text, empty values left out."""
    if type(value) is not dict:
        raise Invalid("owner must be an object")
    clean = {}
    for key, item in value.items():
        if key not in OWNER_KEYS or item is None:
            continue  # unknown keys are for newer servers; ignore them
        if type(item) is int and OWNER_INT_MIN <= item <= OWNER_INT_MAX:
            item = str(item)  # Slurm job ids and uids arrive as numbers too
        if type(item) is not str or len(item) > MAX_TEXT or not is_text(item):
            raise Invalid(
                f"owner.{key} must be a string of at most {MAX_TEXT} printable characters")
        if item:
            clean[key] = item
    return clean or None


RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def timestamp(value: object, now: datetime, oldest: Oldest) -> datetime:
    if not isinstance(value, str):
        raise Invalid("ts is required: an RFC 3339 time such as 2026-11-29T10:00:00Z")
    if not RFC3339.fullmatch(value):
        raise Invalid(f"ts {value[:40]!r} is not an RFC 3339 time with a UTC offset or Z")
    try:
        ts = datetime.fromisoformat(value.upper())
    except ValueError:
        raise Invalid(f"ts {value!r} is not a valid date and time") from None
    if ts > now + FUTURE_SLACK:
        raise Invalid(f"ts {value} is in the future by more than 5 minutes")
    if ts < oldest.at:
        raise Invalid(f"ts {value} is {oldest.why} "
                      f"(before {oldest.at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ})")
    return ts


def sample(index: int, raw: object, now: datetime, oldest: Oldest,
           times: dict[str, datetime] | None = None) -> Sample:
    """One sample checked against protocol v1, or Invalid with the reason.

    The checks are written out for speed (a batch's samples pass here one by one); `times`
    caches parsed timestamps within a batch, where many samples share one.
    """
    if type(raw) is not dict:
        raise Invalid("sample must be an object")
    get = raw.get
    uuid = get("gpu_uuid")
    if type(uuid) is not str or not uuid.strip():
        raise Invalid("gpu_uuid is required (a non-empty string)")
    if len(uuid) > MAX_UUID or not uuid.isprintable() or uuid != uuid.strip():
        raise Invalid(f"gpu_uuid must be at most {MAX_UUID} printable characters")
    text = get("ts")
    ts = times.get(text) if times is not None and type(text) is str else None
    if ts is None:
        ts = timestamp(text, now, oldest)
        if times is not None:
            times[text] = ts
    interval = get("interval_s")
    if type(interval) is not int or not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
        if interval is None:
            raise Invalid(f"interval_s is required (seconds, {MIN_INTERVAL_S} to "
                          f"{MAX_INTERVAL_S})")
        interval = _integer(raw, "interval_s", MIN_INTERVAL_S, MAX_INTERVAL_S)
    allocated = get("allocated")
    if type(allocated) is not bool:
        raise Invalid("allocated is required (true or false)")
    fraction = get("fraction")
    if fraction is None:
        fraction = 1.0
    elif type(fraction) is not float or not 0.0 < fraction <= 1.0:
        fraction = _number(raw, "fraction", 0.0, 1.0, default=1.0, low_open=True)
    util = get("util_pct")
    if util is not None and (type(util) is not float or not 0.0 <= util <= 100.0):
        util = _number(raw, "util_pct", 0.0, 100.0)
    power = get("power_w")
    if power is not None and (type(power) is not float or not 0.0 <= power <= 100_000.0):
        power = _number(raw, "power_w", 0.0, 100_000.0)
    model = get("model")
    if model is not None and (type(model) is not str or len(model) > 128
                              or not model.isprintable()):
        model = _text(raw, "model", 128)
    memory = get("mem_used_mib")
    if memory is not None and (type(memory) is not int or not 0 <= memory <= INT32):
        memory = _integer(raw, "mem_used_mib", 0, INT32)
    total = get("mem_total_mib")
    if total is not None and (type(total) is not int or not 0 <= total <= INT32):
        total = _integer(raw, "mem_total_mib", 0, INT32)
    temp = get("temp_c")
    if temp is not None and (type(temp) is not int or not -100 <= temp <= 250):
        temp = _integer(raw, "temp_c", -100, 250)
    gpu_index = get("gpu_index")
    if gpu_index is not None and (type(gpu_index) is not int or not 0 <= gpu_index <= 32767):
        gpu_index = _integer(raw, "gpu_index", 0, 32767)
    holder_unknown = get("holder_unknown", False)
    if type(holder_unknown) is not bool:
        raise Invalid(f"holder_unknown must be true or false, not {_show(holder_unknown)}")
    parent = get("parent_uuid")
    if parent is not None and (type(parent) is not str or not parent or len(parent) > MAX_UUID
                               or not parent.isprintable() or parent != parent.strip()):
        raise Invalid(f"parent_uuid must be a GPU's uuid: at most {MAX_UUID} printable "
                      "characters")
    return Sample(
        index=index,
        gpu_uuid=uuid,
        ts=ts,
        interval_s=interval,
        allocated=allocated,
        fraction=float(fraction),
        util_pct=None if util is None else float(util),
        mem_used_mib=memory,
        mem_total_mib=total,
        power_w=None if power is None else float(power),
        temp_c=temp,
        gpu_index=gpu_index,
        model=model,
        owner=None if get("owner") is None else owner(get("owner")),
        holder_unknown=holder_unknown,
        parent_uuid=parent,
    )


def samples(raw: list, now: datetime, oldest: Oldest) -> tuple[Columns, list[dict], int]:
    """Valid samples as columns, rejections ({"index", "error"}) and the count of in-batch
    repeats, each sample checked on its own (metering.intake.wire tries a faster path first)."""
    valid, rejected, repeats = _one_by_one(raw, now, oldest)
    return Columns.of(valid), rejected, repeats


def _one_by_one(raw: list, now: datetime, oldest: Oldest) -> tuple[list[Sample], list, int]:
    """A sample repeating an earlier one's (gpu_uuid, ts) is a duplicate when identical and a
    conflict (rejected) when it differs."""
    valid: list[Sample] = []
    rejected: list[dict] = []
    repeats = 0
    seen: dict[tuple[str, datetime], Sample] = {}
    times: dict[str, datetime] = {}
    for index, item in enumerate(raw):
        try:
            parsed = sample(index, item, now, oldest, times)
        except Invalid as error:
            rejected.append({"index": index, "error": str(error)})
            continue
        key = (parsed.gpu_uuid, parsed.ts)
        first = seen.get(key)
        if first is None:
            seen[key] = parsed
            valid.append(parsed)
        elif first.same_reading(parsed):
            repeats += 1
        else:
            rejected.append({"index": index, "error": (
                f"conflict: sample {first.index} has the same gpu_uuid and ts "
                "with different values")})
    return valid, rejected, repeats
