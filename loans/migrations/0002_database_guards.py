"""Rules the database enforces that Django's portable constraints cannot express.

- No two active contracts of one tenant overlap in time. PostgreSQL: an exclusion constraint
  (btree_gist), which also holds against concurrent inserts. SQLite: triggers; SQLite runs one
  writer at a time, so a trigger cannot race.
- A statement, once written, is never updated.
"""

from django.db import migrations

POSTGRESQL = [
    "CREATE EXTENSION IF NOT EXISTS btree_gist",
    """ALTER TABLE loans_contract ADD CONSTRAINT contract_no_overlapping_active
       EXCLUDE USING gist (tenant_id WITH =, daterange(starts_on, ends_on) WITH &&)
       WHERE (status = 'active')""",
    """CREATE FUNCTION loans_statement_immutable() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'a closed statement is never rewritten'; END;
       $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER statement_immutable BEFORE UPDATE ON loans_statement
       FOR EACH ROW EXECUTE FUNCTION loans_statement_immutable()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER statement_immutable ON loans_statement",
    "DROP FUNCTION loans_statement_immutable()",
    "ALTER TABLE loans_contract DROP CONSTRAINT contract_no_overlapping_active",
]

OVERLAP = """
    NEW.status = 'active' AND EXISTS (
        SELECT 1 FROM loans_contract c
        WHERE c.tenant_id = NEW.tenant_id AND c.status = 'active' AND c.id IS NOT NEW.id
          AND c.starts_on < NEW.ends_on AND NEW.starts_on < c.ends_on)
"""
SQLITE = [
    f"""CREATE TRIGGER contract_no_overlapping_active_insert BEFORE INSERT ON loans_contract
        WHEN {OVERLAP}
        BEGIN SELECT RAISE(ABORT, 'contract_no_overlapping_active'); END""",
    f"""CREATE TRIGGER contract_no_overlapping_active_update BEFORE UPDATE ON loans_contract
        WHEN {OVERLAP}
        BEGIN SELECT RAISE(ABORT, 'contract_no_overlapping_active'); END""",
    """CREATE TRIGGER statement_immutable BEFORE UPDATE ON loans_statement
        BEGIN SELECT RAISE(ABORT, 'a closed statement is never rewritten'); END""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER contract_no_overlapping_active_insert",
    "DROP TRIGGER contract_no_overlapping_active_update",
    "DROP TRIGGER statement_immutable",
]


def run(statements_by_vendor):
    def apply(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("loans", "0001_initial")]

    operations = [
        migrations.RunPython(
            run({"postgresql": POSTGRESQL, "sqlite": SQLITE}),
            run({"postgresql": POSTGRESQL_REVERSE, "sqlite": SQLITE_REVERSE}),
        ),
    ]
