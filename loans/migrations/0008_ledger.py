"""The ledger's tables: amendments, correction lines, contracts' signed terms and their window
of instants (filled in by 0009), statements that carry corrections."""

import django.core.validators
import django.db.models.deletion
import django.db.models.expressions
import django.utils.timezone
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('loans', '0007_pending_tasks'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Amendment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('terms', 'terms'), ('termination', 'termination')], default='terms', max_length=12, verbose_name='kind')),
                ('from_period', models.PositiveSmallIntegerField(help_text='Index of the first period it applies to (0 is the first).', verbose_name='from period')),
                ('changes', models.JSONField(help_text='{"term": ["old", "new"], ...}, numbers as text.', verbose_name='changes')),
                ('reason', models.TextField(verbose_name='reason')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='written')),
            ],
            options={
                'verbose_name': 'amendment',
                'verbose_name_plural': 'amendments',
                'ordering': ['contract', 'from_period', 'created_at', 'pk'],
            },
        ),
        migrations.CreateModel(
            name='CorrectionLine',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('period_index', models.PositiveSmallIntegerField(verbose_name='period corrected')),
                ('gpu_hours', models.DecimalField(decimal_places=6, max_digits=16, verbose_name='change in GPU-hours')),
                ('billed_gpu_hours', models.DecimalField(decimal_places=6, max_digits=16, verbose_name='GPU-hours billed before')),
                ('committed_gpu_hours', models.DecimalField(decimal_places=6, max_digits=16)),
                ('overage_rate', models.DecimalField(decimal_places=4, max_digits=12)),
                ('overage_before_gpu_hours', models.DecimalField(decimal_places=6, max_digits=16)),
                ('overage_after_gpu_hours', models.DecimalField(decimal_places=6, max_digits=16)),
                ('overage_before_cost', models.DecimalField(decimal_places=2, max_digits=16)),
                ('overage_after_cost', models.DecimalField(decimal_places=2, max_digits=16)),
                ('amount', models.DecimalField(decimal_places=2, max_digits=16)),
            ],
            options={
                'verbose_name': 'correction',
                'verbose_name_plural': 'corrections',
                'ordering': ['statement', 'period_index'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='contract',
            name='contract_numbers_not_negative',
        ),
        migrations.RemoveConstraint(
            model_name='statement',
            name='statement_total_adds_up',
        ),
        migrations.RenameField(
            model_name='statement',
            old_name='adjustment_gpu_hours',
            new_name='corrections_gpu_hours',
        ),
        migrations.AddField(
            model_name='contract',
            name='currency',
            field=models.CharField(blank=True, help_text='Copied from the plan at signing.', max_length=3, validators=[django.core.validators.RegexValidator('^[A-Z]{3}$', 'Use a three-letter ISO 4217 code, e.g. CNY.')], verbose_name='currency'),
        ),
        migrations.AddField(
            model_name='contract',
            name='gpu_model',
            field=models.CharField(blank=True, help_text='Copied from the plan at signing; empty: any model.', max_length=100, verbose_name='GPU model'),
        ),
        migrations.AddField(
            model_name='contract',
            name='signed_at',
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name='signed'),
        ),
        migrations.AddField(
            model_name='contract',
            name='upfront_fee',
            field=models.DecimalField(blank=True, decimal_places=2, max_digits=14, null=True, validators=[django.core.validators.MinValueValidator(0)], verbose_name='upfront fee'),
        ),
        migrations.AddField(
            model_name='contract',
            name='window_end',
            field=models.DateTimeField(editable=False, null=True, verbose_name='in force until'),
        ),
        migrations.AddField(
            model_name='contract',
            name='window_start',
            field=models.DateTimeField(editable=False, null=True, verbose_name='in force from'),
        ),
        migrations.AddField(
            model_name='recommendation',
            name='applied_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='applied'),
        ),
        migrations.AddField(
            model_name='recommendation',
            name='applied_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='applied by'),
        ),
        migrations.AddField(
            model_name='statement',
            name='corrections_cost',
            field=models.DecimalField(decimal_places=2, default=Decimal('0'), help_text='The sum of the correction lines; may be negative.', max_digits=16),
        ),
        migrations.AlterField(
            model_name='statement',
            name='corrections_gpu_hours',
            field=models.DecimalField(decimal_places=6, default=Decimal('0'), help_text="The change in earlier, already closed periods' usage this statement corrects.", max_digits=16),
        ),
        migrations.AddField(
            model_name='statement',
            name='kind',
            field=models.CharField(choices=[('period', 'period'), ('corrections', 'corrections')], default='period', max_length=12, verbose_name='kind'),
        ),
        migrations.AlterField(
            model_name='contract',
            name='ends_on',
            field=models.DateField(editable=False, help_text='The start date plus the term: the contract ends at local midnight.', verbose_name='ends on'),
        ),
        migrations.AddConstraint(
            model_name='contract',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('committed_gpu_hours__isnull', True), ('committed_gpu_hours__gte', 0), _connector='OR'), models.Q(('committed_rate__isnull', True), ('committed_rate__gte', 0), _connector='OR'), models.Q(('overage_rate__isnull', True), ('overage_rate__gte', 0), _connector='OR'), models.Q(('upfront_fee__isnull', True), ('upfront_fee__gte', 0), _connector='OR')), name='contract_numbers_not_negative', violation_error_message='Committed GPU-hours, rates and fees cannot be negative.'),
        ),
        migrations.AddConstraint(
            model_name='statement',
            constraint=models.CheckConstraint(condition=models.Q(('total_cost', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('committed_cost'), '+', models.F('overage_cost')), '+', models.F('corrections_cost')))), name='statement_total_adds_up'),
        ),
        migrations.AddConstraint(
            model_name='statement',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['period', 'corrections'])), name='statement_kind_known'),
        ),
        migrations.AddField(
            model_name='amendment',
            name='author',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='by'),
        ),
        migrations.AddField(
            model_name='amendment',
            name='contract',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='amendments', to='loans.contract'),
        ),
        migrations.AddField(
            model_name='recommendation',
            name='amendment',
            field=models.OneToOneField(blank=True, help_text='The amendment that applied it.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='recommendation', to='loans.amendment', verbose_name='amendment'),
        ),
        migrations.AddField(
            model_name='correctionline',
            name='corrected',
            field=models.ForeignKey(help_text='The statement of the period corrected.', on_delete=django.db.models.deletion.PROTECT, related_name='corrected_by', to='loans.statement'),
        ),
        migrations.AddField(
            model_name='correctionline',
            name='statement',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='corrections', to='loans.statement'),
        ),
        migrations.AddConstraint(
            model_name='amendment',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['terms', 'termination'])), name='amendment_kind_known'),
        ),
        migrations.AddConstraint(
            model_name='amendment',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='amendment_has_a_reason'),
        ),
        migrations.AddConstraint(
            model_name='correctionline',
            constraint=models.CheckConstraint(condition=models.Q(('amount', django.db.models.expressions.CombinedExpression(models.F('overage_after_cost'), '-', models.F('overage_before_cost')))), name='correction_amount_adds_up'),
        ),
        migrations.AddConstraint(
            model_name='correctionline',
            constraint=models.UniqueConstraint(fields=('statement', 'period_index'), name='correction_once_per_statement_and_period'),
        ),
    ]
