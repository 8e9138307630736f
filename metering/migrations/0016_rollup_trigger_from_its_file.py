"""The rollup trigger's function from its own file (metering/sql/rollups.sql), the text
migration 0015 built by replacing pieces of 0014's, which revised 0011's and 0009's: what
PostgreSQL runs is now readable whole in one place. Loading it changes nothing a database
runs; a later change edits the file and adds a migration that loads it again."""

from importlib import import_module

from django.db import migrations

from metering.sql import load_rollups

physical = import_module("metering.migrations.0015_physical_gpus")


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(physical.FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("metering", "0015_physical_gpus")]

    operations = [migrations.RunPython(load_rollups, backward)]
