"""Storing a batch of samples: validated, devices decided (metering.intake.devices: the node's
own, as physical GPUs; metering.intake.device_limit: within its limit in every hour), usage
attributed within the node's cluster, owners to their ids, then written with no physical GPU
counted past one GPU at any moment and rollups kept exact (metering.intake.store_postgresql,
metering.intake.store_sqlite)."""

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Case, F, Value, When

from metering import partitions
from metering.attribution import Attributor, Rule
from metering.intake import (
    device_limit,
    devices,
    owners,
    protocol,
    store_postgresql,
    store_sqlite,
    wire,
)
from metering.intake.columns import Columns, each_object_once
from metering.models import AttributionRule, Node, hash_token


@dataclass
class Result:
    accepted: int
    duplicates: int
    rejected: list[dict]

    def as_dict(self) -> dict:
        return {"accepted": self.accepted, "duplicates": self.duplicates,
                "rejected": self.rejected}


def oldest(node: Node, now: datetime) -> protocol.Oldest:
    """The earliest time the node's samples may start (DESIGN.md, "Trust"): not before raw
    retention, not past the back-fill horizon, and not before the node was registered, so a
    new token cannot fill the past. A rule of intake only: stored usage is never recounted."""
    horizon = settings.BACKFILL_HORIZON_DAYS
    return max(
        protocol.Oldest(now - timedelta(days=settings.RAW_RETENTION_DAYS),
                        "older than raw retention"),
        protocol.Oldest(now - timedelta(days=horizon),
                        f"older than the back-fill horizon of {horizon} days"),
        protocol.Oldest(node.created_at, f"before node {node.name} was registered"),
        key=lambda floor: floor.at)


def ingest(node: Node, envelope: protocol.Envelope, *, now: datetime) -> Result:
    batch, rejected, repeats = wire.samples(envelope, now, oldest(node, now))
    # Committed at once, outside the guard's transaction below: a partition made inside it
    # would be invisible to other sessions, which would write its day into the default one.
    partitions.ensure_partitions({ts.astimezone(UTC).date() for ts in set(batch.ts)})
    plan = devices.resolve(node, batch, now)
    if device_limit.all_hours_seen(node, batch, plan):  # no hour gains a GPU: the steady state
        return _store(node, envelope, batch, plan, rejected, repeats, now)
    with device_limit.guarded(node):
        device_limit.limit(node, batch, plan, now)
        return _store(node, envelope, batch, plan, rejected, repeats, now)


def _store(node: Node, envelope: protocol.Envelope, batch: Columns,
           plan: devices.Plan, rejected: list[dict], repeats: int, now: datetime) -> Result:
    devices.register(node, batch, plan, now)
    if plan.errors:  # another node's devices, devices past the limit: no id
        rejected.extend({"index": batch.index[k], "error": message}
                        for k, (_reason, message, _holder) in plan.errors.items())
        devices.record_refusals(node, batch, plan.errors, now)
    keep = [k for k, gpu_id in enumerate(plan.ids) if gpu_id is not None]
    kept = batch.keep(keep) if len(keep) < len(plan.ids) else batch
    ids = [plan.ids[k] for k in keep]
    columns = [kept.index, ids, kept.ts, _tenants(kept.owner, node),
               owners.ids_of(kept.owner), kept.interval_s, kept.allocated, kept.fraction,
               kept.util_pct, kept.mem_used_mib, kept.power_w, kept.temp_c,
               kept.holder_unknown]  # store.COLUMNS
    if ids:
        writer = store_postgresql if connection.vendor == "postgresql" else store_sqlite
        inserted, refusals = writer.write(columns, list(kept.gpu_uuid),
                                          finish=lambda: _seen(node, envelope, now),
                                          families=plan.families)
    else:
        inserted, refusals = 0, []
        _seen(node, envelope, now)
    device_limit.remember(node, batch, plan, {r["index"] for r in refusals})
    rejected.extend(refusals)
    rejected.sort(key=lambda item: item["index"])
    return Result(inserted, repeats + len(ids) - inserted - len(refusals), rejected)


def _tenants(owners: list, node: Node) -> list[int | None]:
    """The tenant of each sample; equal owners (one shared dict) are attributed once."""
    attributor = _attributor()
    return each_object_once(
        lambda owner: attributor.tenant_for(owner, node.name, node.cluster_id,
                                            node.default_tenant_id), owners)


RULES_SECONDS = 5
_rules: list = [None, 0.0]  # the attributor and when it was built


def _attributor() -> Attributor:
    """The rules as of at most RULES_SECONDS ago: one query per few seconds, not per batch.
    A rule saved in this process applies at once (forget_rules); elsewhere within seconds."""
    attributor, built = _rules
    if attributor is None or time.monotonic() - built > RULES_SECONDS:
        attributor = Attributor(
            Rule(*row) for row in AttributionRule.objects.values_list(
                "tenant_id", "field", "value", "priority", "cluster_id")
        )
        _rules[:] = [attributor, time.monotonic()]
    return attributor


def forget_rules(**_signal) -> None:
    _rules[:] = [None, 0.0]


NODE_CACHE_SECONDS = 5
_nodes: dict[str, tuple[Node, float]] = {}  # token digest -> (node, cached at)


def node_for_token(token: str) -> Node | None:
    """The node holding this token (Node.objects.by_token), remembered for NODE_CACHE_SECONDS:
    the lookup was a query per batch. A node saved or deleted in this process is forgotten at
    once (forget_nodes, on signals), so a token revoked here is refused by the next request;
    other worker processes refuse it within NODE_CACHE_SECONDS. Unknown tokens are not
    remembered, so a new token works at once and guessing cannot fill the memory."""
    digest = hash_token(token)
    cached = _nodes.get(digest)
    clock = time.monotonic()
    if cached is not None and clock - cached[1] < NODE_CACHE_SECONDS:
        return cached[0]
    node = Node.objects.by_token(token)
    if node is None:
        _nodes.pop(digest, None)
    else:
        _nodes[digest] = (node, clock)
    return node


def forget_nodes(**_signal) -> None:
    _nodes.clear()


SEEN_EVERY = 10  # seconds: how stale "last seen" may be; the UPDATE is skipped in between
_last_seen: dict[int, float] = {}


def _seen(node: Node, envelope: protocol.Envelope, now: datetime) -> None:
    """Last seen, agent version and dropped samples, once the batch is stored (last in its
    transaction where it has one, metering.intake.store_postgresql), holding the node's row only at
    the very end. Skipped while nothing changed and the stored time is less than SEEN_EVERY
    seconds old. The dropped count is worked out from the stored row, not from `node` (which
    may come from a cache that another worker's update has made stale)."""
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
        dropped_samples=F("dropped_samples") + Case(
            When(dropped_samples_reported__lte=reported,
                 then=Value(reported) - F("dropped_samples_reported")),
            default=Value(reported)),
        dropped_samples_reported=reported,
    )
    node.agent_version, node.dropped_samples_reported = envelope.agent_version, reported
    _last_seen[node.pk] = clock


def forget_gpus() -> None:
    """Drop the process's GPU cache (tests rebuild the database under it)."""
    devices.forget()
    device_limit.forget()
    _last_seen.clear()
    owners.forget()
    forget_rules()
    forget_nodes()
