"""A signed contract's tenant and plan of origin are fixed like its numbers: the database
refuses an update that moves it to another tenant or plan, whoever writes it (a PATCH of the
API moved a stated contract, and its next statement billed the other tenant's usage)."""

from importlib import import_module

from django.db import migrations

guards = import_module("loans.migrations.0010_ledger_guards")
COLUMNS = (*guards.SIGNED_COLUMNS, "tenant_id", "plan_id")


def changed(columns) -> str:
    return " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in columns)


def postgresql(columns) -> str:
    return f"""CREATE OR REPLACE FUNCTION loans_contract_signed() RETURNS trigger AS $$
       BEGIN
         IF OLD.signed_at IS NOT NULL AND ({changed(columns)}) THEN
           RAISE EXCEPTION 'signed terms change only by an amendment';
         END IF;
         IF {guards.STATED} AND ({guards.STATED_CHANGED}) THEN
           RAISE EXCEPTION 'a stated contract keeps its start, zone and term';
         END IF;
         RETURN NEW;
       END; $$ LANGUAGE plpgsql"""


def sqlite(columns) -> list[str]:
    return ["DROP TRIGGER IF EXISTS contract_signed", f"""CREATE TRIGGER contract_signed
        BEFORE UPDATE ON loans_contract WHEN OLD.signed_at IS NOT NULL
        AND ({changed(columns).replace("IS DISTINCT FROM", "IS NOT")})
        BEGIN SELECT RAISE(ABORT, 'signed terms change only by an amendment'); END"""]


def apply(columns):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in [postgresql(columns)] if vendor == "postgresql" else sqlite(columns):
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):
    dependencies = [("loans", "0021_sums_within_a_minor_unit")]

    operations = [migrations.RunPython(apply(COLUMNS), apply(guards.SIGNED_COLUMNS))]
