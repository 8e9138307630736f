from django.utils import timezone

from core.audit import AuditedCommand
from loans.services.alerts import delivery, digest


class Command(AuditedCommand):
    help = ("Write the daily and weekly digests that are due, then send every notice that is "
            "due: alerts to people and chat channels, closed statements, digests (Celery beat "
            "does both). Safe to run again: nothing is sent twice.")

    def handle(self, *args, **options):
        now = timezone.now()
        written = digest.write_due(now)
        self.stdout.write(f"{written} digests written.")
        total_sent = total_failed = 0
        while True:  # a batch at a time, until nothing due is left
            sent, failed = delivery.deliver_due(now)
            total_sent, total_failed = total_sent + sent, total_failed + failed
            if sent or failed:
                self.stdout.write(f"... {total_sent} sent, {total_failed} failed")
            if sent + failed < delivery.BATCH:
                break
        self.stdout.write(f"{total_sent} sent, {total_failed} failed (tried again later).")
