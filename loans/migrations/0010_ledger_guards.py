"""Rules of the ledger the database enforces, so that no code path and no shell session can
break them:

- Two contracts of one tenant that hold their instants (active or ended) never overlap in
  instants, whatever their zones. PostgreSQL: an exclusion constraint over the window
  (btree_gist, enabled by 0002), which also holds against concurrent inserts. SQLite: triggers
  (one writer at a time, so they cannot race).
- A signed contract's numbers never change in place (amendments change them); once it has a
  statement, its start and zone never change and its term may only shorten (termination), never
  below the periods already stated.
- Statements, their correction lines and amendments, once written, are never updated.

SQLite drops a table's triggers when Django rebuilds the table, so every trigger of the ledger
is (re)created here.
"""

from django.db import migrations

SIGNED_COLUMNS = ("base_quota_gpus", "max_quota_gpus", "committed_gpu_hours", "committed_rate",
                  "overage_rate", "overage_multiplier", "upfront_fee", "currency", "gpu_model",
                  "signed_at")
SIGNED_CHANGED = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in SIGNED_COLUMNS)
STATED = "EXISTS (SELECT 1 FROM loans_statement s WHERE s.contract_id = OLD.id)"
STATED_CHANGED = """NEW.starts_on IS DISTINCT FROM OLD.starts_on
    OR NEW.time_zone IS DISTINCT FROM OLD.time_zone OR NEW.term_months > OLD.term_months
    OR NEW.term_months <= (SELECT max(s.period_index) FROM loans_statement s
                           WHERE s.contract_id = OLD.id AND s.kind = 'period')"""

POSTGRESQL = [
    "ALTER TABLE loans_contract DROP CONSTRAINT IF EXISTS contract_no_overlapping_active",
    """ALTER TABLE loans_contract ADD CONSTRAINT contract_no_overlap
       EXCLUDE USING gist (tenant_id WITH =, tstzrange(window_start, window_end) WITH &&)
       WHERE (status IN ('active', 'ended'))""",
    f"""CREATE OR REPLACE FUNCTION loans_contract_signed() RETURNS trigger AS $$
       BEGIN
         IF OLD.signed_at IS NOT NULL AND ({SIGNED_CHANGED}) THEN
           RAISE EXCEPTION 'signed terms change only by an amendment';
         END IF;
         IF {STATED} AND ({STATED_CHANGED}) THEN
           RAISE EXCEPTION 'a stated contract keeps its start, zone and term';
         END IF;
         RETURN NEW;
       END; $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER contract_signed BEFORE UPDATE ON loans_contract
       FOR EACH ROW EXECUTE FUNCTION loans_contract_signed()""",
    """CREATE OR REPLACE FUNCTION loans_written_once() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'the ledger is written once and never rewritten'; END;
       $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER amendment_immutable BEFORE UPDATE ON loans_amendment
       FOR EACH ROW EXECUTE FUNCTION loans_written_once()""",
    """CREATE TRIGGER correction_immutable BEFORE UPDATE ON loans_correctionline
       FOR EACH ROW EXECUTE FUNCTION loans_written_once()""",
    "DROP TRIGGER IF EXISTS statement_immutable ON loans_statement",
    """CREATE TRIGGER statement_immutable BEFORE UPDATE ON loans_statement
       FOR EACH ROW EXECUTE FUNCTION loans_statement_immutable()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER correction_immutable ON loans_correctionline",
    "DROP TRIGGER amendment_immutable ON loans_amendment",
    "DROP FUNCTION loans_written_once()",
    "DROP TRIGGER contract_signed ON loans_contract",
    "DROP FUNCTION loans_contract_signed()",
    "ALTER TABLE loans_contract DROP CONSTRAINT contract_no_overlap",
    """ALTER TABLE loans_contract ADD CONSTRAINT contract_no_overlapping_active
       EXCLUDE USING gist (tenant_id WITH =, daterange(starts_on, ends_on) WITH &&)
       WHERE (status = 'active')""",
]

OVERLAP = """
    NEW.status IN ('active', 'ended') AND EXISTS (
        SELECT 1 FROM loans_contract c
        WHERE c.tenant_id = NEW.tenant_id AND c.status IN ('active', 'ended')
          AND c.id IS NOT NEW.id
          AND c.window_start < NEW.window_end AND NEW.window_start < c.window_end)
"""
SQLITE_TRIGGERS = {
    "contract_no_overlap_insert": f"""BEFORE INSERT ON loans_contract WHEN {OVERLAP}
        BEGIN SELECT RAISE(ABORT, 'contract_no_overlap'); END""",
    "contract_no_overlap_update": f"""BEFORE UPDATE ON loans_contract WHEN {OVERLAP}
        BEGIN SELECT RAISE(ABORT, 'contract_no_overlap'); END""",
    "contract_signed": f"""BEFORE UPDATE ON loans_contract
        WHEN OLD.signed_at IS NOT NULL AND ({SIGNED_CHANGED.replace("IS DISTINCT FROM", "IS NOT")})
        BEGIN SELECT RAISE(ABORT, 'signed terms change only by an amendment'); END""",
    "contract_stated": f"""BEFORE UPDATE ON loans_contract
        WHEN {STATED} AND ({STATED_CHANGED.replace("IS DISTINCT FROM", "IS NOT")})
        BEGIN SELECT RAISE(ABORT, 'a stated contract keeps its start, zone and term'); END""",
    "statement_immutable": """BEFORE UPDATE ON loans_statement
        BEGIN SELECT RAISE(ABORT, 'a closed statement is never rewritten'); END""",
    "amendment_immutable": """BEFORE UPDATE ON loans_amendment
        BEGIN SELECT RAISE(ABORT, 'the ledger is written once and never rewritten'); END""",
    "correction_immutable": """BEFORE UPDATE ON loans_correctionline
        BEGIN SELECT RAISE(ABORT, 'the ledger is written once and never rewritten'); END""",
}
OLD_SQLITE = ("contract_no_overlapping_active_insert", "contract_no_overlapping_active_update")
SQLITE = [f"DROP TRIGGER IF EXISTS {name}" for name in (*OLD_SQLITE, *SQLITE_TRIGGERS)] + [
    f"CREATE TRIGGER {name} {body}" for name, body in SQLITE_TRIGGERS.items()]
SQLITE_REVERSE = [f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS]


def run(statements_by_vendor):
    def apply(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("loans", "0009_sign_contracts")]

    operations = [
        migrations.RunPython(
            run({"postgresql": POSTGRESQL, "sqlite": SQLITE}),
            run({"postgresql": POSTGRESQL_REVERSE, "sqlite": SQLITE_REVERSE}),
        ),
    ]
