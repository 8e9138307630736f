"""A batch as it comes off the wire (agent protocol v1): a fast path, then a per-sample one.

The fast path: msgspec decodes the body straight into typed structs in one pass of C, checking
every type and range that the per-sample checks in metering.intake.protocol make; what is left
(timestamps, repeats inside the batch, printable text) is checked here on the distinct values,
which are few. Any doubt at all sends the batch down the per-sample path (metering.intake.protocol),
which names each rejected sample and its reason; so the fast path may give up on more than the
per-sample one refuses, and never accepts more.
"""

from datetime import datetime
from typing import Annotated

import msgspec
from msgspec.structs import asdict, astuple

from metering.intake import protocol
from metering.intake.columns import Columns, each_once
from metering.intake.protocol import (
    INT32,
    MAX_INTERVAL_S,
    MAX_TEXT,
    MAX_UUID,
    MIN_INTERVAL_S,
)

Meta = msgspec.Meta
Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Id = Annotated[int, Meta(ge=protocol.OWNER_INT_MIN, le=protocol.OWNER_INT_MAX)]


# gc=False: a batch decodes a thousand of these, which hold only strings and numbers (no
# reference cycles), so the garbage collector need not track them (parse: 380 -> 310 us).
class Owner(msgspec.Struct, frozen=True, gc=False):
    """Unknown keys are ignored (msgspec's default), as the per-sample path ignores them."""

    namespace: Text | Id | None = None
    pod: Text | Id | None = None
    container: Text | Id | None = None
    user: Text | Id | None = None
    account: Text | Id | None = None
    job: Text | Id | None = None


class Sample(msgspec.Struct, gc=False):
    gpu_uuid: Annotated[str, Meta(min_length=1, max_length=MAX_UUID)]
    ts: str
    interval_s: Annotated[int, Meta(ge=MIN_INTERVAL_S, le=MAX_INTERVAL_S)]
    allocated: bool
    fraction: Annotated[float, Meta(gt=0.0, le=1.0)] = 1.0
    util_pct: Annotated[float, Meta(ge=0.0, le=100.0)] | None = None
    mem_used_mib: Annotated[int, Meta(ge=0, le=INT32)] | None = None
    mem_total_mib: Annotated[int, Meta(ge=0, le=INT32)] | None = None
    power_w: Annotated[float, Meta(ge=0.0, le=100_000.0)] | None = None
    temp_c: Annotated[int, Meta(ge=-100, le=250)] | None = None
    gpu_index: Annotated[int, Meta(ge=0, le=32767)] | None = None
    model: Annotated[str, Meta(max_length=128)] | None = None
    owner: Owner | None = None
    holder_unknown: bool = False
    parent_uuid: Annotated[str, Meta(min_length=1, max_length=MAX_UUID)] | None = None


class Batch(msgspec.Struct):
    node: Annotated[str, Meta(min_length=1)]
    samples: list[Sample]
    agent_version: Annotated[str, Meta(max_length=64)] = ""
    dropped_samples: Annotated[int, Meta(ge=0, le=2**53)] = 0


_decoder = msgspec.json.Decoder(Batch)


def parse(body: bytes) -> protocol.Envelope:
    """The batch's envelope, or ProtocolError saying what is wrong with it."""
    try:
        batch = _decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return protocol.parse(body)  # it names what is wrong
    if not protocol.is_text(batch.agent_version):
        return protocol.parse(body)
    return protocol.Envelope(batch.node, batch.agent_version, batch.dropped_samples,
                             batch.samples, typed=True, body=body)


def samples(envelope: protocol.Envelope, now: datetime, oldest: protocol.Oldest
            ) -> tuple[Columns, list[dict], int]:
    """Valid samples as columns, rejections ({"index", "error"}) and the count of repeats
    inside the batch (protocol.samples)."""
    if envelope.typed:
        fast = _columns(envelope.samples, now, oldest)
        if fast is not None:
            return fast, [], 0
        return protocol.samples(protocol.parse(envelope.body).samples, now, oldest)
    return protocol.samples(envelope.samples, now, oldest)


def _columns(samples: list[Sample], now: datetime, oldest: protocol.Oldest) -> Columns | None:
    """The samples as columns if every one is valid and the batch repeats no key, else None."""
    if not samples:
        return None
    # One C-level transpose: a tuple per field, in Sample's field order.
    (uuids, texts, intervals, allocated, fractions, utils, memory, totals, power, temps,
     indexes, models, owners, unknown, parents) = zip(*map(astuple, samples), strict=True)
    if not all(u.isprintable() and u == u.strip() for u in set(uuids)):
        return None
    if not all(p is None or (p.isprintable() and p == p.strip()) for p in set(parents)):
        return None
    try:
        stamps = each_once(lambda text: protocol.timestamp(text, now, oldest), texts)
    except protocol.Invalid:
        return None
    if len(set(zip(uuids, stamps, strict=True))) != len(samples):
        return None  # repeats inside the batch: the per-sample path sorts them out
    if not all(m is None or protocol.is_text(m) for m in set(models)):
        return None
    owners = _owners(owners)
    if owners is None:
        return None
    return Columns(list(range(len(samples))), uuids, stamps, intervals, allocated, fractions,
                   utils, memory, totals, power, temps, indexes, models, owners, unknown,
                   parents)


def _owners(values: tuple[Owner | None, ...]) -> list[dict | None] | None:
    """Owners as the per-sample path leaves them, or None if one is invalid; equal owners share
    one dict (cheap to encode and to attribute)."""
    try:
        return each_once(lambda owner: None if owner is None else protocol.owner(asdict(owner)),
                         values)
    except protocol.Invalid:
        return None
