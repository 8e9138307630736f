"""Amounts keep four decimal places, so each can be rounded to its own currency's minor unit
(0.001 KWD; loans.maths.billing.money): they were rounded to cents, whatever the currency.

On SQLite a changed column rebuilds its table, which drops that table's triggers: the ledger's
guards (loans 0010, with 0022's fuller contract_signed) are dropped first and made again after,
as loans 0021 does."""

from importlib import import_module

from decimal import Decimal

import django.core.validators
from django.db import migrations, models

guards = import_module("loans.migrations.0010_ledger_guards")
within = import_module("loans.migrations.0021_sums_within_a_minor_unit")
signed = import_module("loans.migrations.0022_signed_tenant_and_plan")

DROP = within.DROP
MAKE = within.sqlite([*guards.SQLITE[-len(guards.SQLITE_TRIGGERS):],
                      *signed.sqlite(signed.COLUMNS)])


class Migration(migrations.Migration):
    dependencies = [
        ('loans', '0022_signed_tenant_and_plan'),
    ]

    operations = [
        migrations.RunPython(DROP, MAKE),
        migrations.AlterField(
            model_name='contract',
            name='upfront_fee',
            field=models.DecimalField(blank=True, decimal_places=4, max_digits=16, null=True, validators=[django.core.validators.MinValueValidator(0)], verbose_name='upfront fee'),
        ),
        migrations.AlterField(
            model_name='correctionline',
            name='amount',
            field=models.DecimalField(decimal_places=4, max_digits=18, verbose_name='amount'),
        ),
        migrations.AlterField(
            model_name='correctionline',
            name='overage_after_cost',
            field=models.DecimalField(decimal_places=4, max_digits=18, verbose_name='overage cost after'),
        ),
        migrations.AlterField(
            model_name='correctionline',
            name='overage_before_cost',
            field=models.DecimalField(decimal_places=4, max_digits=18, verbose_name='overage cost before'),
        ),
        migrations.AlterField(
            model_name='plan',
            name='upfront_fee',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=16, validators=[django.core.validators.MinValueValidator(0)], verbose_name='upfront fee'),
        ),
        migrations.AlterField(
            model_name='recommendation',
            name='expected_saving',
            field=models.DecimalField(blank=True, decimal_places=4, max_digits=18, null=True, verbose_name='expected saving per period'),
        ),
        migrations.AlterField(
            model_name='statement',
            name='committed_cost',
            field=models.DecimalField(decimal_places=4, max_digits=18, verbose_name='committed cost'),
        ),
        migrations.AlterField(
            model_name='statement',
            name='corrections_cost',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), help_text='The sum of the correction lines; may be negative.', max_digits=18, verbose_name='corrections'),
        ),
        migrations.AlterField(
            model_name='statement',
            name='overage_cost',
            field=models.DecimalField(decimal_places=4, max_digits=18, verbose_name='overage cost'),
        ),
        migrations.AlterField(
            model_name='statement',
            name='total_cost',
            field=models.DecimalField(decimal_places=4, max_digits=18, verbose_name='total'),
        ),
        migrations.RunPython(MAKE, DROP),
    ]
