"""A physical GPU is counted once (DESIGN.md, "Trust").

- **Devices point at their physical GPU.** A MIG instance or time-sliced replica gets a
  `physical` row: the GPU it is part of (the parent the agent names, the replica's id before
  `::`, or the node's GPU at the instance's index). A whole GPU's is NULL: it is its own. Rows
  of the old text `parent` become links; a parent that never reported itself becomes a row of
  its own that has no samples (`index:<n>@<node>` for a MIG instance known only by its index).
- **The trigger checks a family's fractions.** Where a statement's devices share a physical GPU
  (`shared` on the physical row, or a part), the physical rows are locked with the devices, in
  id order, and the fractions of every stored sample of the family must sum to at most 1 at
  each instant: checked at each start that a new sample covers (the sum of a set of intervals
  is highest at the latest start among them). A whole GPU that is its own family costs nothing
  more than before: the lock statement reads two more columns of the rows it locks.
- **Refusals are one row a node and reason**, however many devices a batch names.
- **A node may report 8 physical GPUs unless an operator says otherwise** (an HGX or DGX server).
"""

from importlib import import_module

from django.db import migrations, models
from django.db.models import Count, Max, Min, Sum

leaner = import_module("metering.migrations.0014_leaner_rollup_trigger")
TABLE = leaner.TABLE
TOLERANCE = "1e-9"  # seven slices of 1/7 sum to 0.9999999999999998 in floating point

FAMILIES = """    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- Physical GPUs shared by several devices (a GPU with MIG instances or replicas): their
    -- rows are locked with the devices', and their devices' fractions are checked together.
    SELECT array_agg(DISTINCT coalesce(physical_id, id))
           FILTER (WHERE physical_id IS NOT NULL OR shared)
      INTO families FROM metering_gpu WHERE id = ANY(ids);
"""

FAMILY_CHECK = f"""        IF families IS NOT NULL AND EXISTS (
            WITH family AS (
                SELECT id AS gpu_id, coalesce(physical_id, id) AS physical FROM metering_gpu
                WHERE id = ANY(families) OR physical_id = ANY(families)
            ), fresh AS (
                SELECT f.physical, i.ts, i.ts + i.interval_s * interval '1 second' AS ends
                FROM inserted i JOIN family f ON f.gpu_id = i.gpu_id
            ), held AS (  -- every stored sample of the families near the statement, its own too
                SELECT f.physical, u.ts, u.ts + u.interval_s * interval '1 second' AS ends,
                       u.fraction
                FROM {TABLE} u JOIN family f ON f.gpu_id = u.gpu_id
                WHERE u.ts >= (SELECT min(ts) FROM fresh) - interval '1 hour'
                  AND u.ts < (SELECT max(ends) FROM fresh)
            ), moments AS (
                SELECT DISTINCT h.physical, h.ts AS at FROM held h JOIN fresh n
                  ON n.physical = h.physical AND n.ts <= h.ts AND h.ts < n.ends
            )
            SELECT 1 FROM moments m JOIN held h
              ON h.physical = m.physical AND h.ts <= m.at AND m.at < h.ends
            GROUP BY m.physical, m.at HAVING sum(h.fraction) > 1 + {TOLERANCE}) THEN
            RAISE EXCEPTION 'the fractions of one physical GPU pass 1 at one moment'
                USING ERRCODE = 'exclusion_violation';
        END IF;
    END IF;

    -- A sample counts in the hours"""


def _function() -> str:
    function = leaner.FUNCTION
    pieces = [
        ("    gridded boolean;\n", "    gridded boolean;\n    families integer[];\n"),
        ("    IF ids IS NULL THEN\n        RETURN NULL;\n    END IF;\n", FAMILIES),
        ("            WHERE id = ANY(ids) ORDER BY id FOR UPDATE) held",
         "            WHERE id = ANY(ids || coalesce(families, '{}')) ORDER BY id FOR UPDATE) held"),
        ("    END IF;\n\n    -- A sample counts in the hours", FAMILY_CHECK),
    ]
    for old, new in pieces:
        assert function.count(old) == 1, f"migration 0014's trigger is not as expected: {old!r}"
        function = function.replace(old, new)
    return function


FUNCTION = _function()


def is_part(uuid: str) -> bool:
    return uuid.startswith("MIG-") or "::" in uuid


def link_parents(apps, schema_editor):
    """Each part's old text parent becomes a link to a physical row (made where missing)."""
    Gpu = apps.get_model("metering", "Gpu")
    GpuTenure = apps.get_model("metering", "GpuTenure")
    for part in Gpu.objects.exclude(parent="").exclude(parent=models.F("uuid")).select_related(
            "node"):
        if part.parent.startswith("index:"):
            index = int(part.parent.split(":", 1)[1])
            whole = [g for g in Gpu.objects.filter(node=part.node, index=index)
                     if not is_part(g.uuid)]
            key = whole[0].uuid if whole else f"index:{index}@{part.node.name}"
        else:
            key = part.parent
        physical, created = Gpu.objects.get_or_create(uuid=key, defaults={
            "node": part.node, "index": part.index, "model": part.model,
            "memory_total_mib": part.memory_total_mib, "first_seen_at": part.first_seen_at,
            "last_seen_at": None, "share": 1.0})
        if created:
            GpuTenure.objects.create(gpu=physical, node=part.node,
                                     since=part.tenures.order_by("since").first().since)
        Gpu.objects.filter(pk=part.pk).update(physical=physical)
        Gpu.objects.filter(pk=physical.pk).update(shared=True)


def merge_refusals(apps, schema_editor):
    """One refusal row a node and reason: the latest device named, the samples summed."""
    DeviceRefusal = apps.get_model("metering", "DeviceRefusal")
    groups = DeviceRefusal.objects.values("node_id", "reason").annotate(
        n=Count("id"), first=Min("first_at"), last=Max("last_at"), total=Sum("samples"))
    for group in groups:
        rows = DeviceRefusal.objects.filter(node_id=group["node_id"], reason=group["reason"])
        keep = rows.order_by("-last_at", "-pk").first()
        rows.exclude(pk=keep.pk).delete()
        DeviceRefusal.objects.filter(pk=keep.pk).update(
            devices=group["n"], first_at=group["first"], last_at=group["last"],
            samples=group["total"])


def forward_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def backward_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(leaner.FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("metering", "0014_leaner_rollup_trigger")]

    operations = [
        migrations.AddField(
            model_name="gpu", name="physical",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=models.PROTECT, related_name="parts",
                to="metering.gpu", verbose_name="physical GPU",
                help_text="The GPU a MIG instance or replica is part of; empty for a whole GPU."),
        ),
        migrations.AddField(
            model_name="gpu", name="shared",
            field=models.BooleanField(default=False, editable=False, verbose_name="has parts"),
        ),
        migrations.RunPython(link_parents, migrations.RunPython.noop),
        migrations.RemoveField(model_name="gpu", name="parent"),
        migrations.AddField(
            model_name="devicerefusal", name="devices",
            field=models.PositiveIntegerField(default=1, help_text="In the last batch refused.",
                                              verbose_name="devices refused"),
        ),
        migrations.AlterField(
            model_name="devicerefusal", name="reason",
            field=models.CharField(choices=[
                ("device_limit", "past the node's device limit"),
                ("other_node", "still reported by another node"),
                ("other_cluster", "held by a node of another cluster"),
                ("parent", "its parent GPU is not this node's")],
                max_length=13, verbose_name="reason"),
        ),
        migrations.AlterField(
            model_name="devicerefusal", name="gpu_uuid",
            field=models.CharField(help_text="One of the devices refused in the last batch.",
                                   max_length=96, verbose_name="device"),
        ),
        migrations.RemoveConstraint(model_name="devicerefusal",
                                    name="refusal_once_per_node_device_reason"),
        migrations.RunPython(merge_refusals, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="devicerefusal",
            constraint=models.UniqueConstraint(fields=("node", "reason"),
                                               name="refusal_once_per_node_and_reason"),
        ),
        migrations.AlterField(
            model_name="node", name="max_devices",
            field=models.PositiveSmallIntegerField(
                default=8, verbose_name="physical GPUs",
                help_text="The node's physical GPU count (8 on an HGX or DGX server): its token "
                          "may report at most this many GPUs in any hour, MIG instances and "
                          "replicas counting as their GPU; devices past it are refused and "
                          "operators alerted."),
        ),
        migrations.RunPython(forward_trigger, backward_trigger),
    ]
