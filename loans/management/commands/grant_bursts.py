from django.utils import timezone

from core.audit import AuditedCommand
from loans.services.bursts import process_queue


class Command(AuditedCommand):
    help = ("Grant queued burst requests that fit the pool now, in order; expire those whose "
            "window passed (Celery beat runs this every minute). Safe to run again.")

    def handle(self, *args, **options):
        run = process_queue(timezone.now())
        self.stdout.write(f"{run.granted} granted, {run.expired} expired.")
