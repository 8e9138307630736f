"""Contracts signed before terms were copied at signing take their plan's numbers now, as they
were priced until today; every contract gets its window of instants.

Statements written before corrections were priced as money carried late usage as extra
GPU-hours of the period that billed it ("adjustment"). Each such statement gets a correction
line for the period before it, with its GPU-hours and a zero amount: its money is already in
that statement's overage, as it was billed, and the line keeps the ledger from billing the
same hours again.
"""

import calendar
from datetime import UTC, date, datetime, time
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from django.db import migrations, models

RATE = Decimal("0.0001")


def add_months(day: date, months: int) -> date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def local_midnight(day: date, zone: str) -> datetime:
    return datetime.combine(day, time(0), tzinfo=ZoneInfo(zone)).astimezone(UTC)


def pick(contract, plan, name):
    value = getattr(contract, name)
    return getattr(plan, name) if value is None else value


def sign(apps, schema_editor):
    Contract = apps.get_model("loans", "Contract")
    for contract in Contract.objects.select_related("plan"):
        plan = contract.plan
        term = pick(contract, plan, "term_months")
        if contract.status in ("active", "ended") and contract.signed_at is None:
            rate = pick(contract, plan, "committed_rate")
            if contract.overage_rate is not None:
                overage = contract.overage_rate
            elif contract.overage_multiplier is not None:
                overage = rate * contract.overage_multiplier
            elif plan.overage_rate is not None:
                overage = plan.overage_rate
            else:
                overage = rate * plan.overage_multiplier
            for name in ("base_quota_gpus", "max_quota_gpus", "committed_gpu_hours",
                         "upfront_fee"):
                setattr(contract, name, pick(contract, plan, name))
            contract.committed_rate = Decimal(rate).quantize(RATE, ROUND_HALF_UP)
            contract.overage_rate = Decimal(overage).quantize(RATE, ROUND_HALF_UP)
            contract.term_months = term
            contract.currency = plan.currency
            contract.gpu_model = plan.gpu_model
            contract.signed_at = contract.created_at
        contract.ends_on = add_months(contract.starts_on, term)
        contract.window_start = local_midnight(contract.starts_on, contract.time_zone)
        contract.window_end = local_midnight(contract.ends_on, contract.time_zone)
        contract.save()


def legacy_adjustments(apps, schema_editor):
    Statement = apps.get_model("loans", "Statement")
    CorrectionLine = apps.get_model("loans", "CorrectionLine")
    for statement in Statement.objects.exclude(corrections_gpu_hours=0):
        earlier = (Statement.objects.filter(contract_id=statement.contract_id,
                                            period_index__lt=statement.period_index)
                   .order_by("-period_index").first())
        if earlier is None:
            continue
        CorrectionLine.objects.create(
            statement=statement, corrected=earlier, period_index=earlier.period_index,
            gpu_hours=statement.corrections_gpu_hours,
            billed_gpu_hours=earlier.allocated_gpu_hours,
            committed_gpu_hours=earlier.committed_gpu_hours, overage_rate=earlier.overage_rate,
            overage_before_gpu_hours=0, overage_after_gpu_hours=0, overage_before_cost=0,
            overage_after_cost=0, amount=0)


class Migration(migrations.Migration):
    dependencies = [("loans", "0008_ledger")]

    operations = [
        migrations.RunPython(sign, migrations.RunPython.noop),
        migrations.RunPython(legacy_adjustments, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="contract", name="window_start",
            field=models.DateTimeField(editable=False, verbose_name="in force from"),
        ),
        migrations.AlterField(
            model_name="contract", name="window_end",
            field=models.DateTimeField(editable=False, verbose_name="in force until"),
        ),
        migrations.AddConstraint(
            model_name='contract',
            constraint=models.CheckConstraint(condition=models.Q(('window_end__gt', models.F('window_start'))), name='contract_window_forward'),
        ),
        migrations.AddConstraint(
            model_name='contract',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['active', 'ended']), _negated=True), models.Q(('signed_at__isnull', False), ('base_quota_gpus__isnull', False), ('max_quota_gpus__isnull', False), ('committed_gpu_hours__isnull', False), ('committed_rate__isnull', False), ('overage_rate__isnull', False), ('term_months__isnull', False), ('upfront_fee__isnull', False), models.Q(('currency', ''), _negated=True)), _connector='OR'), name='contract_signed_terms_complete'),
        ),
    ]
