from django.utils import timezone

from core.audit import AuditedCommand
from metering.retention import purge_raw_samples


class Command(AuditedCommand):
    help = "Forget raw samples older than RAW_RETENTION_DAYS (rollups are kept forever)."

    def handle(self, *args, **options):
        purged = purge_raw_samples(timezone.now())
        self.stdout.write(
            f"Raw samples before {purged.cutoff:%Y-%m-%d %H:%M %Z} forgotten: "
            f"{purged.partitions_dropped} daily partitions dropped, "
            f"{purged.rows_deleted} rows deleted."
        )
