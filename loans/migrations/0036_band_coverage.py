from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("loans", "0035_directory_accounts"),
    ]

    operations = [
        migrations.CreateModel(
            name="BandCoverage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("measured_on", models.DateField(verbose_name="measured on")),
                ("bucket", models.CharField(max_length=8, verbose_name="days left")),
                ("inside", models.PositiveIntegerField(verbose_name="inside the band")),
                ("forecasts", models.PositiveIntegerField(verbose_name="forecasts")),
            ],
            options={
                "verbose_name": "band coverage",
                "verbose_name_plural": "band coverage",
                "ordering": ["-measured_on", "bucket"],
                "constraints": [models.UniqueConstraint(fields=("measured_on", "bucket"),
                                                        name="band_coverage_once_a_day")],
            },
        ),
    ]
