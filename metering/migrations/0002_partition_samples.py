"""On PostgreSQL, the raw sample table becomes partitioned by day (see metering.partitions).

The table is empty when this runs (it ships with the first release); SQLite keeps a plain table.
"""

from django.db import migrations

TABLE = "metering_usagesample"
DEFAULT = f"{TABLE}_default"

# The same columns and constraints Django's migration created, on a table partitioned by ts.
PARTITIONED_TABLE = f"""
CREATE TABLE {TABLE} (
    "ts" timestamp with time zone NOT NULL,
    "interval_s" smallint NOT NULL CHECK ("interval_s" >= 0),
    "allocated" boolean NOT NULL,
    "fraction" double precision NOT NULL,
    "util_pct" double precision NULL,
    "mem_used_mib" integer NULL CHECK ("mem_used_mib" >= 0),
    "power_w" double precision NULL,
    "temp_c" smallint NULL,
    "owner" jsonb NULL,
    "gpu_id" integer NOT NULL,
    "node_id" bigint NOT NULL,
    "tenant_id" bigint NULL,
    CONSTRAINT "sample_interval_in_range" CHECK ("interval_s" >= 1 AND "interval_s" <= 3600),
    CONSTRAINT "sample_fraction_in_range" CHECK ("fraction" > 0.0 AND "fraction" <= 1.0),
    CONSTRAINT "sample_util_is_a_percentage"
        CHECK ("util_pct" IS NULL OR ("util_pct" >= 0.0 AND "util_pct" <= 100.0)),
    PRIMARY KEY ("gpu_id", "ts")
) PARTITION BY RANGE ("ts")
"""

INDEX = f'CREATE INDEX "sample_ts" ON {TABLE} ("ts")'


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP TABLE {TABLE}")
    schema_editor.execute(PARTITIONED_TABLE)
    schema_editor.execute(INDEX)
    schema_editor.execute(f'CREATE TABLE "{DEFAULT}" PARTITION OF {TABLE} DEFAULT')


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP TABLE {TABLE}")
    schema_editor.execute(PARTITIONED_TABLE.replace('PARTITION BY RANGE ("ts")', ""))
    schema_editor.execute(INDEX)


class Migration(migrations.Migration):
    dependencies = [("metering", "0001_initial")]

    operations = [migrations.RunPython(partition, unpartition)]
