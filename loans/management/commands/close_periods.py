from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.audit import AuditedCommand
from loans.services.alerts import notices
from loans.services.ledger.closing import close_due_periods


class Command(AuditedCommand):
    help = ("Write the statement of every period that has ended and whose late-data grace has "
            "passed, with the corrections of earlier periods (Celery beat runs this hourly). "
            "Safe to run again: a period is stated once, a correction billed once. Each tenant's "
            "leads are sent their new statements as PDF.")

    def add_arguments(self, parser):
        parser.add_argument("--now", help="close as of this ISO 8601 moment (default: now)")

    def handle(self, *args, **options):
        now = timezone.now()
        if options["now"]:
            try:
                now = parse_datetime(options["now"])
            except ValueError:  # well formed, but no such moment (month 13, hour 25)
                now = None
            if now is None or now.tzinfo is None:
                raise CommandError("--now must be an ISO 8601 moment with an offset, "
                                   "e.g. 2026-12-01T02:00:00+08:00")
        run = close_due_periods(now, progress=self._written)
        told = notices.for_statements(run.written, now)
        if told:
            self.stdout.write(f"{len(told)} statement e-mails to leads queued.")
        self.stdout.write(f"{len(run.written)} statements written; {run.contracts} contracts "
                          "checked.")

    def _written(self, statements) -> None:
        for s in statements:
            what = (f"period {s.period_index + 1}: {s.allocated_gpu_hours} GPU-h"
                    if s.kind == s.Kind.PERIOD else "corrections after the last period")
            corrections = (f", corrections {s.corrections_gpu_hours:+} GPU-h "
                           f"{s.corrections_cost:+} {s.currency}" if s.corrections.exists() else "")
            self.stdout.write(
                f"{s.contract.tenant.slug} contract {s.contract_id} {what}{corrections}, "
                f"total {s.total_cost} {s.currency}, completeness {s.completeness:.2%}")
