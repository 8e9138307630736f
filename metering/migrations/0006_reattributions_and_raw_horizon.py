"""Re-attributions (an operator moving usage between tenants, kept for good) and the raw
sample horizon (how far back raw samples are complete, for rebuilds that must not erase).

A database whose raw samples were purged before the horizon was recorded gets it from what is
left: rollups older than the oldest raw sample have lost their samples, so the horizon is the
first whole hour of raw data.
"""

from datetime import timedelta

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def horizon_from_what_is_left(apps, schema_editor):
    UsageSample = apps.get_model("metering", "UsageSample")
    TenantHour = apps.get_model("metering", "TenantHour")
    RawHorizon = apps.get_model("metering", "RawHorizon")
    hours = TenantHour.objects.order_by("hour").values_list("hour", flat=True)
    first_rollup, last_rollup = hours.first(), hours.last()
    if first_rollup is None:
        return
    oldest = UsageSample.objects.order_by("ts").values_list("ts", flat=True).first()
    if oldest is None:  # every rollup has lost its samples
        RawHorizon.objects.create(purged_before=last_rollup + timedelta(hours=1))
        return
    floor = oldest.replace(minute=0, second=0, microsecond=0)
    if first_rollup < floor or oldest != floor:  # the hour of the oldest may be partial too
        RawHorizon.objects.create(purged_before=floor if oldest == floor
                                  else floor + timedelta(hours=1))


class Migration(migrations.Migration):

    dependencies = [
        ('loans', '0008_ledger'),
        ('metering', '0005_rollups_leave_room_for_updates'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='RawHorizon',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('purged_before', models.DateTimeField(verbose_name='raw samples purged before')),
            ],
            options={
                'verbose_name': 'raw sample horizon',
                'verbose_name_plural': 'raw sample horizon',
            },
        ),
        migrations.CreateModel(
            name='Reattribution',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(choices=[('node', "a node's usage"), ('namespace', "a namespace's usage"), ('account', "an account's usage"), ('user', "a user's usage"), ('job', "a job's usage"), ('unattributed', 'unattributed usage')], max_length=12, verbose_name='what')),
                ('value', models.CharField(blank=True, help_text="The node's name or the owner value; empty for unattributed usage.", max_length=253, verbose_name='value')),
                ('start', models.DateTimeField(verbose_name='from')),
                ('end', models.DateTimeField(verbose_name='until')),
                ('gpu_hours', models.DecimalField(decimal_places=6, max_digits=16, verbose_name='allocated GPU-hours moved')),
                ('samples', models.PositiveIntegerField(verbose_name='samples moved')),
                ('moved_from', models.JSONField(default=dict, help_text='Allocated GPU-hours by former tenant id ("" for unattributed).', verbose_name='moved from')),
                ('reason', models.TextField(verbose_name='reason')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='done')),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='by')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='loans.tenant', verbose_name='to tenant')),
            ],
            options={
                'verbose_name': 're-attribution',
                'verbose_name_plural': 're-attributions',
                'ordering': ['-created_at'],
                'constraints': [models.CheckConstraint(condition=models.Q(('end__gt', models.F('start'))), name='reattribution_forward'), models.CheckConstraint(condition=models.Q(('scope__in', ['node', 'namespace', 'account', 'user', 'job', 'unattributed'])), name='reattribution_scope_known'), models.CheckConstraint(condition=models.Q(models.Q(('scope', 'unattributed'), ('value', '')), models.Q(models.Q(('scope', 'unattributed'), _negated=True), models.Q(('value', ''), _negated=True)), _connector='OR'), name='reattribution_value_matches_scope')],
            },
        ),
        migrations.RunPython(horizon_from_what_is_left, migrations.RunPython.noop),
    ]
