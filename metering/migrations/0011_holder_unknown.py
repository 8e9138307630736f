"""A sample may say its holder is unknown: the agent asked the scheduler who held the device
(agent.holders) and got no answer. What it measured is kept; its interval counts as a gap in
the device's completeness (reported_s leaves it out), never as a reported idle GPU.

The column is a boolean with a constant default: on PostgreSQL adding it rewrites nothing (the
default lives in the catalogue), and it fits in the padding after `allocated`, so a row keeps
its size. The rollup trigger is migration 0009's, with reported_s counting only samples whose
holder is known.
"""

from importlib import import_module

from django.db import migrations, models

lean = import_module("metering.migrations.0009_lean_samples")

TABLE = lean.TABLE

FUNCTION = (
    lean.FUNCTION
    .replace("i.fraction, i.util_pct,\n", "i.fraction, i.util_pct, i.holder_unknown,\n", 1)
    .replace("SELECT gpu_id, tenant_id, ts, allocated, fraction, util_pct, hour, seconds,\n",
             "SELECT gpu_id, tenant_id, ts, allocated, fraction, util_pct, holder_unknown, "
             "hour, seconds,\n", 1)
    .replace("SELECT gpu_id, tenant_id, ts, allocated, fraction, util_pct, hour + interval",
             "SELECT gpu_id, tenant_id, ts, allocated, fraction, util_pct, holder_unknown, "
             "hour + interval", 1)
    .replace("sum(seconds) AS reported_s",
             "COALESCE(sum(seconds) FILTER (WHERE NOT holder_unknown), 0) AS reported_s", 1)
)
assert FUNCTION.count("holder_unknown") == 4, "migration 0009's trigger is not as expected"


def forward(apps, schema_editor):
    run = schema_editor.execute
    if schema_editor.connection.vendor == "postgresql":
        run(f"ALTER TABLE {TABLE} ADD COLUMN holder_unknown boolean NOT NULL DEFAULT false")
        run(FUNCTION)
    else:
        run(f'ALTER TABLE "{TABLE}" ADD COLUMN "holder_unknown" bool NOT NULL DEFAULT 0')


def backward(apps, schema_editor):
    run = schema_editor.execute
    if schema_editor.connection.vendor == "postgresql":
        run(lean.FUNCTION)
    run(f'ALTER TABLE "{TABLE}" DROP COLUMN "holder_unknown"')


class Migration(migrations.Migration):
    dependencies = [("metering", "0010_labels")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="usagesample", name="holder_unknown",
                    field=models.BooleanField(db_default=False, default=False,
                                              verbose_name="holder unknown"),
                ),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
