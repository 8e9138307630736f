"""Writes that span rows of metering's tables: what loans may ask of metering beside the reads
of metering.usage (a node's creation, re-attribution, a tenant's attribution rules)."""

from datetime import datetime, timedelta
from decimal import Decimal
from math import ceil

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import ExpressionWrapper, F, FloatField, Max, Min, Q, Sum
from django.utils.translation import gettext as _

from metering.models import (
    Cluster,
    Gpu,
    GpuTenure,
    Node,
    Owner,
    RawHorizon,
    Reattribution,
    UsageSample,
    default_cluster,
    hand_over,
)
from metering.models.samples import MAX_INTERVAL_S, MIN_INTERVAL_S  # noqa: F401 - loans reads them here
from metering.recount import insert_rows, rebuild_rollups
from metering.rules import (  # noqa: F401 - the tenant API's rules go through here
    AttributionRuleSerializer,
    replace_rules,
    rule_clashes,
)
from metering.usage import HOUR, ceil_hour


def gpu_move(*, gpu: Gpu, node: Node, now: datetime) -> int:
    """An operator's move of a GPU (with every device of its physical GPU: its MIG instances
    and replicas) to `node`, into another cluster too, from the end of its last stored sample
    on; the node that reported it keeps its hours. Returns how many devices moved."""
    return hand_over(gpu.physical_id or gpu.pk, node, lambda covered: covered or now)


@transaction.atomic
def node_create(*, name: str, default_tenant=None,
                cluster: Cluster | None = None) -> tuple[Node, str]:
    """A new node of `cluster` (the default cluster if None) and its token in clear (shown
    once, stored hashed)."""
    node = Node(name=name, default_tenant=default_tenant,
                cluster_id=cluster.pk if cluster else default_cluster())
    node.full_clean()
    node.save()
    return node, node.issue_token()


def validation_message(error: ValidationError) -> str:
    """One line for a terminal: 'field: message; field: message'."""
    if hasattr(error, "message_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
            for field, messages in error.message_dict.items()
        )
    return " ".join(error.messages)


OWNER_SCOPES = ("namespace", "account", "user", "job")


def reattribute(*, scope: str, value: str, start: datetime, end: datetime, tenant_id: int,
                reason: str, author=None, now: datetime) -> Reattribution:
    """Move the usage of [start, end) of a node, of an owner value or of no tenant to a tenant,
    and keep the record of it. The raw samples change tenant and their hours are recounted, so
    open periods change at once and closed ones get corrections on both sides. A sample that
    crosses `start` or `end` is split there first, so exactly the range's usage moves. Only
    hours whose raw samples are all kept can move (rollups of purged days are left as they
    are)."""
    value = (value or "").strip()
    errors = _check_move(scope, value, start, end, reason, now)
    if errors:
        raise ValidationError(errors)
    node = None
    if scope == Reattribution.Scope.NODE:
        node = Node.objects.filter(name=value).first()
        if node is None:
            raise ValidationError({"value": _("There is no node named %(name)s.")
                                   % {"name": value[:63]}})

    def matching(low: datetime, high: datetime):
        samples = UsageSample.objects.filter(ts__gte=low, ts__lt=high)
        if node is not None:
            samples = samples.filter(reported_by(node, low, high))
        elif scope in OWNER_SCOPES:
            samples = samples.filter(owner_id__in=Owner.objects.filter(**{scope: value})
                                     .values("pk"))
        else:
            samples = samples.filter(tenant_id__isnull=True)
        return samples.exclude(tenant_id=tenant_id)

    held = ExpressionWrapper(F("interval_s") * F("fraction"), output_field=FloatField())
    with transaction.atomic():
        split_end = _split(matching(end - LONGEST, end), end)
        _split(matching(start - LONGEST, start), start)
        samples = matching(start, end)
        moved = {("" if row["tenant_id"] is None else str(row["tenant_id"])):
                 round((row["seconds"] or 0.0) / 3600, 6)
                 for row in samples.values("tenant_id").annotate(
                     seconds=Sum(held, filter=Q(allocated=True))).order_by("tenant_id")}
        span = samples.aggregate(first=Min("ts"), last=Max("ts"))
        count = samples.update(tenant_id=tenant_id)
        if count:
            # Every hour a moved sample covers, and the one where a split sample's rest begins.
            until = span["last"] + LONGEST
            rebuild_rollups(span["first"], max(until, end + LONGEST) if split_end else until)
        return Reattribution.objects.create(
            scope=scope, value=value, start=start, end=end, tenant_id=tenant_id,
            gpu_hours=Decimal(repr(sum(moved.values()))).quantize(Decimal("0.000001")),
            samples=count, moved_from=moved, reason=reason.strip(), author=author,
            created_at=now)


LONGEST = timedelta(seconds=MAX_INTERVAL_S)  # the longest interval a sample may have
SAMPLE_FIELDS = ("gpu_id", "ts", "tenant_id", "owner_id", "interval_s", "allocated", "fraction",
                 "util_pct", "mem_used_mib", "power_w", "temp_c", "holder_unknown")


def _split(candidates, boundary: datetime) -> int:
    """Split each of `candidates` (samples that began before `boundary`) that runs past it in
    two: the sample up to the first whole second at or after `boundary`, and a sample of the
    rest from there, the same reading. Their hours are recounted by the caller. Returns how
    many were split."""
    split = 0
    for row in candidates.values(*SAMPLE_FIELDS):
        ts, interval = row["ts"], row["interval_s"]
        head = ceil((boundary - ts).total_seconds())
        if not 0 < head < interval:
            continue
        # Shortened first, so that the rest, stored next, overlaps nothing.
        UsageSample.objects.filter(gpu_id=row["gpu_id"], ts=ts).update(interval_s=head)
        rest = {**row, "ts": ts + timedelta(seconds=head), "interval_s": interval - head}
        insert_rows(UsageSample, SAMPLE_FIELDS, [tuple(
            connection.ops.adapt_datetimefield_value(rest[name]) if name == "ts"
            else rest[name] for name in SAMPLE_FIELDS)])
        split += 1
    return split


def reported_by(node: Node, start: datetime, end: datetime) -> Q:
    """The samples of [start, end) this node reported: its devices while it held them
    (GpuTenure). Matches nothing if it held none."""
    held = Q(gpu_id__in=[])
    for tenure in GpuTenure.objects.filter(node=node, since__lt=end).exclude(until__lte=start):
        until = min(end, tenure.until) if tenure.until else end
        held |= Q(gpu_id=tenure.gpu_id, ts__gte=max(start, tenure.since), ts__lt=until)
    return held


def _check_move(scope: str, value: str, start: datetime, end: datetime, reason: str,
                now: datetime) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if scope not in Reattribution.Scope.values:
        errors["scope"] = [_("Choose what to move: %(scopes)s.") % {
            "scopes": ", ".join(Reattribution.Scope.values)}]
    elif scope == Reattribution.Scope.UNATTRIBUTED and value:
        errors["value"] = [_("Unattributed usage has no value to match; leave it empty.")]
    elif scope != Reattribution.Scope.UNATTRIBUTED and not value:
        errors["value"] = [_("Say which node or owner value's usage to move.")]
    if end <= start:
        errors["end"] = [_("The end must be after the start.")]
    if start > now:
        errors["start"] = [_("Usage that has not happened yet cannot be moved.")]
    horizon = RawHorizon.complete_from()
    # The first hours after the horizon may hold samples that began before it: their rollups
    # are kept as they are (metering.recount.rebuild_rollups), so nothing in them can move.
    recountable = ceil_hour(horizon) + HOUR if horizon is not None else None
    if recountable is not None and start < recountable:
        errors["start"] = [_("Raw samples before %(when)s have been purged (rollups are kept as "
                             "they are); only usage since then can be moved.")
                           % {"when": recountable.isoformat()}]
    if not (reason or "").strip():
        errors["reason"] = [_("Say why the usage is moved.")]
    return errors


def end_jobs(cluster_id: int, ends: dict[str, datetime]) -> int:
    """Samples the agents stored as held by a Slurm job (owner `job`) of this cluster from
    the job's End on, as sacct reports it, are the job's no more: a prolog record whose epilog
    never ran held its GPUs until the agent's hourly check with squeue (DESIGN.md, "Trust").
    From End on they are stored as not allocated and without an owner, a sample crossing End
    split there, and their hours recounted: open periods change at once, closed ones get
    corrections. `ends`: job id -> End. Returns how many samples changed; in the steady state
    (agents stop at the epilog) one query finds none."""
    if not ends:
        return 0
    owners = dict(Owner.objects.filter(job__in=list(ends)).values_list("pk", "job"))
    if not owners:
        return 0
    on_cluster = UsageSample.objects.filter(owner_id__in=list(owners),
                                            gpu__node__cluster_id=cluster_id)
    earliest = min(ends[job] for job in owners.values())
    late = [(row["gpu_id"], row["ts"], row["owner_id"]) for row in on_cluster.filter(
        ts__gte=earliest - LONGEST).values("gpu_id", "ts", "owner_id", "interval_s")
        if row["ts"] + timedelta(seconds=row["interval_s"]) > ends[owners[row["owner_id"]]]]
    if not late:
        return 0
    changed = 0
    with transaction.atomic():
        for owner_id in {owner for _gpu, _ts, owner in late}:
            end = ends[owners[owner_id]]
            mine = on_cluster.filter(owner_id=owner_id)
            _split(mine.filter(ts__gte=end - LONGEST, ts__lt=end), end)
            changed += mine.filter(ts__gte=end).update(allocated=False, owner_id=None)
        rebuild_rollups(min(ts for _gpu, ts, _owner in late),
                        max(ts for _gpu, ts, _owner in late) + 2 * LONGEST)
    return changed

