"""Intake accepts a node's samples only from its creation (DESIGN.md, "Trust"). A node that
existed before this rule takes its first stored sample's time as its creation, where that is
earlier, so nothing it has stored or spooled within the horizon is refused for being older."""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import Min


def first_samples(apps, schema_editor):
    Node = apps.get_model("metering", "Node")
    UsageSample = apps.get_model("metering", "UsageSample")
    for node in Node.objects.only("pk", "created_at"):
        first = UsageSample.objects.filter(gpu__tenures__node=node).aggregate(first=Min("ts"))
        if first["first"] is not None and first["first"] < node.created_at:
            Node.objects.filter(pk=node.pk).update(created_at=first["first"])


class Migration(migrations.Migration):
    dependencies = [("metering", "0016_rollup_trigger_from_its_file")]

    operations = [
        # Set by code (the demo sets it back), no longer fixed at the row's insertion.
        migrations.AlterField(
            model_name="node", name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False,
                                       verbose_name="created")),
        migrations.RunPython(first_samples, migrations.RunPython.noop, elidable=True),
    ]
