from django.db import migrations, models


def void_cancelled(apps, schema_editor):
    """Memberships of contracts cancelled before this rule: void since they were last changed."""
    member = apps.get_model("loans", "SharingMember")
    for row in member.objects.filter(contract__status="cancelled", voided_at__isnull=True):
        member.objects.filter(pk=row.pk).update(voided_at=row.changed_at)


class Migration(migrations.Migration):
    dependencies = [("loans", "0030_multiplier_help")]

    operations = [
        migrations.AddField(
            model_name="sharingmember",
            name="voided_at",
            field=models.DateTimeField(
                blank=True, null=True, verbose_name="void since",
                help_text="When the contract was cancelled before its start: the membership "
                          "shares nothing."),
        ),
        migrations.RunPython(void_cancelled, migrations.RunPython.noop),
    ]
