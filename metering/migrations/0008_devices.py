"""Devices know their physical GPU (a MIG instance's or replica's, for device limits) and their
share of it (for capacity); which node reported a device when is kept (GpuTenure); devices a
node reported and the meter refused are kept for the alert job (DeviceRefusal). Existing
devices get their GPU and an open tenure on their node since they were first seen."""

import django.db.models.deletion
from django.db import migrations, models


def existing_devices(apps, schema_editor):
    Gpu = apps.get_model("metering", "Gpu")
    GpuTenure = apps.get_model("metering", "GpuTenure")
    for gpu in Gpu.objects.all():
        if gpu.uuid.startswith("MIG-") and gpu.index is not None:
            gpu.parent = f"index:{gpu.index}"
        else:
            gpu.parent = gpu.uuid.split("::", 1)[0]
        gpu.save(update_fields=["parent"])
        GpuTenure.objects.create(gpu=gpu, node_id=gpu.node_id, since=gpu.first_seen_at)


class Migration(migrations.Migration):

    dependencies = [
        ('metering', '0007_clusters'),
    ]

    operations = [
        migrations.AddField(
            model_name='gpu',
            name='parent',
            field=models.CharField(blank=True, help_text='The GPU a MIG instance or replica is part of; the device itself else.', max_length=96, verbose_name='physical GPU'),
        ),
        migrations.AddField(
            model_name='gpu',
            name='share',
            field=models.FloatField(default=1.0, help_text="For capacity: a MIG instance's or replica's fraction, else 1.", verbose_name='share of its GPU'),
        ),
        migrations.CreateModel(
            name='DeviceRefusal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('gpu_uuid', models.CharField(max_length=96, verbose_name='device')),
                ('reason', models.CharField(choices=[('device_limit', "past the node's device limit"), ('other_node', 'still reported by another node')], max_length=12, verbose_name='reason')),
                ('first_at', models.DateTimeField(verbose_name='first refused')),
                ('last_at', models.DateTimeField(verbose_name='last refused')),
                ('samples', models.PositiveBigIntegerField(default=0, verbose_name='samples refused')),
                ('holder', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='metering.node', verbose_name='held by')),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='refusals', to='metering.node')),
            ],
            options={
                'verbose_name': 'refused device',
                'verbose_name_plural': 'refused devices',
                'ordering': ['-last_at'],
                'constraints': [models.UniqueConstraint(fields=('node', 'gpu_uuid', 'reason'), name='refusal_once_per_node_device_reason')],
            },
        ),
        migrations.CreateModel(
            name='GpuTenure',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('since', models.DateTimeField(verbose_name='since')),
                ('until', models.DateTimeField(blank=True, null=True, verbose_name='until')),
                ('gpu', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tenures', to='metering.gpu')),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tenures', to='metering.node')),
            ],
            options={
                'verbose_name': 'device tenure',
                'verbose_name_plural': 'device tenures',
                'ordering': ['gpu', 'since'],
                'constraints': [models.UniqueConstraint(condition=models.Q(('until__isnull', True)), fields=('gpu',), name='tenure_one_node_at_a_time')],
            },
        ),
        migrations.RunPython(existing_devices, migrations.RunPython.noop),
    ]
