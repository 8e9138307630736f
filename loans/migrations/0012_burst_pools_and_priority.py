"""Burst priorities mean what attribution rules' do, lower first (they meant higher first): an
old priority p becomes 100 - p, so the queue keeps its order. Granted bursts record their pool
(their contract's GPU model; a plan of any model draws on the pool that has most room)."""

from django.db import migrations, models


def lower_first(apps, schema_editor):
    BurstRequest = apps.get_model("loans", "BurstRequest")
    BurstRequest.objects.update(priority=100 - models.F("priority"))
    for burst in BurstRequest.objects.filter(state="granted").select_related("contract"):
        burst.pool = burst.contract.gpu_model
        burst.save(update_fields=["pool"])


class Migration(migrations.Migration):

    dependencies = [
        ('loans', '0011_device_refused_alerts'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='burstrequest',
            options={'ordering': ['priority', 'created_at', 'pk'], 'verbose_name': 'burst request', 'verbose_name_plural': 'burst requests'},
        ),
        migrations.AddField(
            model_name='burstrequest',
            name='pool',
            field=models.CharField(blank=True, help_text='The GPU model whose pool granted it (for a plan of any model, the pool that had most room).', max_length=100, verbose_name='pool'),
        ),
        migrations.AlterField(
            model_name='burstrequest',
            name='priority',
            field=models.SmallIntegerField(default=100, help_text='Lower is served first (as for attribution rules); equal ones in order.', verbose_name='priority'),
        ),
        migrations.RunPython(lower_first, migrations.RunPython.noop),
    ]
