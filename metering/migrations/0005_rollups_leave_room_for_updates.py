"""On PostgreSQL, the rollup tables' pages keep a third free: a GPU hour (or tenant hour, or
tenant instant) is updated by every batch that reports in it, and an update that finds room on
its row's page is a heap-only tuple, which touches no index. With full pages about one update
in six moved to another page and added a row to each of the table's four indexes."""

from django.db import migrations

TABLES = ("metering_gpuhour", "metering_tenanthour", "metering_tenantinstant")


def leave_room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = 70)")


def fill(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("metering", "0004_rollups_kept_by_the_database")]

    operations = [migrations.RunPython(leave_room, fill)]
