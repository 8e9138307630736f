"""A contract's one-time upfront fee is billed on its first statement, and the total adds it
(it was signed and counted by buy-vs-loan, but billed nowhere). A statement keeps its plan's
name as it was when written (a plan renamed later renamed the old statements' FOCUS rows).

On SQLite the changed check rebuilds the statement table: the ledger's triggers are dropped
first and made again after, as loans 0023 does."""

from decimal import Decimal
from importlib import import_module

import django.db.models.expressions
from django.db import migrations, models

money = import_module("loans.migrations.0023_money_in_each_currencys_minor_unit")


class Migration(migrations.Migration):
    dependencies = [
        ('loans', '0023_money_in_each_currencys_minor_unit'),
    ]

    operations = [
        migrations.RunPython(money.DROP, money.MAKE),
        migrations.RemoveConstraint(
            model_name='statement',
            name='statement_total_adds_up',
        ),
        migrations.AddField(
            model_name='statement',
            name='plan_name',
            field=models.CharField(blank=True, help_text="The plan's name when the statement was written (a plan renamed later does not rename old statements).", max_length=100, verbose_name='plan'),
        ),
        migrations.AddField(
            model_name='statement',
            name='upfront_fee',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), help_text="The contract's one-time fee, on its first statement.", max_digits=18, verbose_name='upfront fee'),
        ),
        migrations.AddConstraint(
            model_name='statement',
            constraint=models.CheckConstraint(condition=models.Q(('total_cost__gt', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('committed_cost'), '+', models.F('overage_cost')), '+', models.F('corrections_cost')), '+', models.F('upfront_fee')), '-', models.Value(Decimal('0.00001')))), ('total_cost__lt', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('committed_cost'), '+', models.F('overage_cost')), '+', models.F('corrections_cost')), '+', models.F('upfront_fee')), '+', models.Value(Decimal('0.00001'))))), name='statement_total_adds_up'),
        ),
        migrations.RunPython(money.MAKE, money.DROP),
    ]
