"""Operators are alerted of devices the meter refused (past a device limit, or two nodes at once)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('loans', '0010_ledger_guards'),
    ]

    operations = [
        migrations.AlterField(
            model_name='alert',
            name='kind',
            field=models.CharField(choices=[('commitment_used', 'commitment used'), ('projected_overage', 'projected overage'), ('projected_unused', 'projected unused commitment'), ('idle_gpus', 'idle GPUs'), ('node_silent', 'node silent'), ('incomplete_data', 'incomplete data'), ('device_refused', 'device refused')], max_length=24, verbose_name='kind'),
        ),
    ]
