"""API tokens carry a scope and an expiry. Tokens issued before keep what they could do: they
read and write, and never expire (an operator revokes them, or issues scoped ones)."""

from django.db import migrations, models

import loans.models.tokens

SCOPES = [("read", "read"), ("read write", "read write")]


class Migration(migrations.Migration):

    dependencies = [
        ("loans", "0031_sharing_member_void"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken", name="expires_at",
            field=models.DateTimeField(
                null=True, verbose_name="expires",
                help_text="Refused from then on (empty: a token from before expiries, never).")),
        migrations.AlterField(
            model_name="apitoken", name="expires_at",
            field=models.DateTimeField(
                default=loans.models.tokens.default_expiry, null=True, verbose_name="expires",
                help_text="Refused from then on (empty: a token from before expiries, never).")),
        migrations.AddField(
            model_name="apitoken", name="scope",
            field=models.CharField(
                choices=SCOPES, default="read write", max_length=10, verbose_name="scope",
                help_text="read: every read the user may make, no write.")),
        migrations.AlterField(
            model_name="apitoken", name="scope",
            field=models.CharField(
                choices=SCOPES, default="read", max_length=10, verbose_name="scope",
                help_text="read: every read the user may make, no write.")),
    ]
