"""Money that adds up is checked within a hundredth of a minor unit, not as exact equality:
SQLite keeps decimal columns as floats, where 0.10 + 0.20 != 0.30 and closing a period
failed; PostgreSQL's numeric differences are whole minor units, so the check stays exact there.

On SQLite a new check rebuilds the table, which its triggers that name the statement tables
would break: they are dropped first and made again after (loans 0010's)."""

from decimal import Decimal
from importlib import import_module

from django.db import migrations, models
from django.db.models import F, Q, Value

guards = import_module("loans.migrations.0010_ledger_guards")
TOLERANCE = Value(Decimal("0.00001"))


def adds_up(field: str, total) -> Q:
    return Q(**{f"{field}__gt": total - TOLERANCE}) & Q(**{f"{field}__lt": total + TOLERANCE})


def sqlite(statements):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for sql in statements:
                schema_editor.execute(sql)
    return apply


DROP = sqlite(guards.SQLITE_REVERSE)
MAKE = sqlite(guards.SQLITE[-len(guards.SQLITE_TRIGGERS):])


class Migration(migrations.Migration):
    dependencies = [("loans", "0020_meter_mismatch_alerts")]

    operations = [
        migrations.RunPython(DROP, MAKE),
        migrations.RemoveConstraint(model_name="correctionline", name="correction_amount_adds_up"),
        migrations.RemoveConstraint(model_name="statement", name="statement_total_adds_up"),
        migrations.AddConstraint(
            model_name="correctionline",
            constraint=models.CheckConstraint(
                condition=adds_up("amount", F("overage_after_cost") - F("overage_before_cost")),
                name="correction_amount_adds_up"),
        ),
        migrations.AddConstraint(
            model_name="statement",
            constraint=models.CheckConstraint(
                condition=adds_up("total_cost", F("committed_cost") + F("overage_cost")
                                  + F("corrections_cost")),
                name="statement_total_adds_up"),
        ),
        migrations.RunPython(MAKE, DROP),
    ]
