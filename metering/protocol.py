"""Agent protocol v1 (DESIGN.md): parsing and validation in plain code, no ORM, no serializers.

This is the hot path: a 500-sample batch is checked in well under a millisecond. A bad sample is
rejected with its index and reason and never costs its valid neighbours.
"""

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson

MAX_UUID = 96
MAX_TEXT = 253
OWNER_KEYS = ("namespace", "pod", "container", "user", "account", "job")
FUTURE_SLACK = timedelta(minutes=5)
INT32 = 2**31 - 1


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

    def same_reading(self, other: "Sample") -> bool:
        """Equal in everything a sample measures (what a resent sample must repeat)."""
        return (self.interval_s, self.allocated, self.fraction, self.util_pct,
                self.mem_used_mib, self.power_w, self.temp_c, self.owner) == (
            other.interval_s, other.allocated, other.fraction, other.util_pct,
            other.mem_used_mib, other.power_w, other.temp_c, other.owner)


@dataclass(frozen=True, slots=True)
class Envelope:
    node: str
    agent_version: str
    dropped_samples: int
    samples: list


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


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
            raise ProtocolError(400, f"body is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ProtocolError(400, "body must be a JSON object with node and samples")
    node = data.get("node")
    if not isinstance(node, str) or not node:
        raise ProtocolError(400, "node must be the node's name (a non-empty string)")
    version = data.get("agent_version", "")
    if not isinstance(version, str) or len(version) > 64:
        raise ProtocolError(400, "agent_version must be a string of at most 64 characters")
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
    return value


def _owner(raw: dict) -> dict[str, str] | None:
    owner = raw.get("owner")
    if owner is None:
        return None
    if not isinstance(owner, dict):
        raise Invalid("owner must be an object")
    clean = {}
    for key in OWNER_KEYS:
        value = owner.get(key)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # Slurm job ids and uids arrive as numbers too
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise Invalid(f"owner.{key} must be a string of at most {MAX_TEXT} characters")
        if value:
            clean[key] = value
    return clean or None


RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})"
)


def _timestamp(raw: dict, now: datetime, oldest: datetime) -> datetime:
    value = raw.get("ts")
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
    if ts < oldest:
        raise Invalid(f"ts {value} is older than raw retention (before {oldest:%Y-%m-%dT%H:%MZ})")
    return ts


def sample(index: int, raw: object, now: datetime, oldest: datetime) -> Sample:
    """One sample checked against protocol v1, or Invalid with the reason."""
    if not isinstance(raw, dict):
        raise Invalid("sample must be an object")
    uuid = raw.get("gpu_uuid")
    if not isinstance(uuid, str) or not uuid.strip():
        raise Invalid("gpu_uuid is required (a non-empty string)")
    if len(uuid) > MAX_UUID or not uuid.isprintable() or uuid != uuid.strip():
        raise Invalid(f"gpu_uuid must be at most {MAX_UUID} printable characters")
    interval = raw.get("interval_s")
    if interval is None:
        raise Invalid("interval_s is required (seconds, 1 to 3600)")
    interval = _integer(raw, "interval_s", 1, 3600)
    allocated = raw.get("allocated")
    if not isinstance(allocated, bool):
        raise Invalid("allocated is required (true or false)")
    return Sample(
        index=index,
        gpu_uuid=uuid,
        ts=_timestamp(raw, now, oldest),
        interval_s=interval,
        allocated=allocated,
        fraction=_number(raw, "fraction", 0.0, 1.0, default=1.0, low_open=True),
        util_pct=_number(raw, "util_pct", 0.0, 100.0),
        mem_used_mib=_integer(raw, "mem_used_mib", 0, INT32),
        mem_total_mib=_integer(raw, "mem_total_mib", 0, INT32),
        power_w=_number(raw, "power_w", 0.0, 100_000.0),
        temp_c=_integer(raw, "temp_c", -100, 250),
        gpu_index=_integer(raw, "gpu_index", 0, 32767),
        model=_text(raw, "model", 128),
        owner=_owner(raw),
    )


def samples(raw: list, now: datetime, oldest: datetime) -> tuple[list[Sample], list[dict], int]:
    """Valid samples, rejections ({"index", "error"}) and the count of in-batch repeats.

    A sample repeating an earlier one's (gpu_uuid, ts) is a duplicate when identical and a
    conflict (rejected) when it differs.
    """
    valid: list[Sample] = []
    rejected: list[dict] = []
    repeats = 0
    seen: dict[tuple[str, datetime], Sample] = {}
    for index, item in enumerate(raw):
        try:
            parsed = sample(index, item, now, oldest)
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
