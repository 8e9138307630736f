"""Clusters: every node belongs to one, and attribution rules on owner values (namespace,
account, user, job) hold within one. Existing nodes and owner rules join the cluster named
"default", so attribution is unchanged until an operator splits the fleet."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

import metering.models


def into_the_default_cluster(apps, schema_editor):
    Cluster = apps.get_model("metering", "Cluster")
    Node = apps.get_model("metering", "Node")
    AttributionRule = apps.get_model("metering", "AttributionRule")
    default, _created = Cluster.objects.get_or_create(name="default")
    Node.objects.update(cluster=default)
    AttributionRule.objects.exclude(field="node").update(cluster=default)


class Migration(migrations.Migration):
    dependencies = [
        ("loans", "0010_ledger_guards"),
        ("metering", "0006_reattributions_and_raw_horizon"),
    ]

    operations = [
        migrations.CreateModel(
            name="Cluster",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=63, unique=True, validators=[django.core.validators.RegexValidator("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", "Use 1-63 letters, digits, dots, hyphens and underscores, starting with a letter or digit.")], verbose_name="name")),
                ("kind", models.CharField(choices=[("kubernetes", "Kubernetes"), ("slurm", "Slurm"), ("plain", "plain group")], default="plain", max_length=12, verbose_name="scheduler")),
                ("description", models.TextField(blank=True, verbose_name="description")),
                ("created_at", models.DateTimeField(auto_now_add=True, verbose_name="created")),
            ],
            options={"verbose_name": "cluster", "verbose_name_plural": "clusters", "ordering": ["name"]},
        ),
        migrations.AddConstraint(
            model_name="cluster",
            constraint=models.CheckConstraint(condition=models.Q(("kind__in", ["kubernetes", "slurm", "plain"])), name="cluster_kind_known"),
        ),
        migrations.RemoveConstraint(model_name="attributionrule", name="attribution_value_claimed_once"),
        migrations.AddField(
            model_name="node", name="max_devices",
            field=models.PositiveSmallIntegerField(default=16, help_text="How many GPUs this node's token may report (MIG instances count as their GPU); devices past it are refused and operators alerted.", verbose_name="max devices"),
        ),
        migrations.AddField(
            model_name="attributionrule", name="cluster",
            field=models.ForeignKey(blank=True, help_text="Where the owner value means this tenant; empty for a node rule.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name="rules", to="metering.cluster", verbose_name="cluster"),
        ),
        migrations.AddField(
            model_name="node", name="cluster",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name="nodes", to="metering.cluster", verbose_name="cluster"),
        ),
        migrations.RunPython(into_the_default_cluster, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="node", name="cluster",
            field=models.ForeignKey(default=metering.models.default_cluster, help_text="Owner rules (namespace, account, user, job) match only within it.", on_delete=django.db.models.deletion.PROTECT, related_name="nodes", to="metering.cluster", verbose_name="cluster"),
        ),
        migrations.AddConstraint(
            model_name="attributionrule",
            constraint=models.UniqueConstraint(condition=models.Q(("field", "node"), _negated=True), fields=("cluster", "field", "value"), name="attribution_value_claimed_once_in_cluster", violation_error_message="Another rule already claims this value in this cluster."),
        ),
        migrations.AddConstraint(
            model_name="attributionrule",
            constraint=models.UniqueConstraint(condition=models.Q(("field", "node")), fields=("field", "value"), name="attribution_node_claimed_once", violation_error_message="Another rule already claims this node."),
        ),
        migrations.AddConstraint(
            model_name="attributionrule",
            constraint=models.CheckConstraint(condition=models.Q(models.Q(("field", "node"), ("cluster__isnull", True)), models.Q(models.Q(("field", "node"), _negated=True), ("cluster__isnull", False)), _connector="OR"), name="attribution_cluster_matches_field", violation_error_message="An owner rule names its cluster; a node rule names none."),
        ),
    ]
