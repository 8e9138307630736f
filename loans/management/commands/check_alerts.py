from django.utils import timezone

from core.audit import AuditedCommand
from loans.services.alerts.conditions import evaluate_alerts


class Command(AuditedCommand):
    help = ("Open an alert for each condition that holds now and resolve those that cleared "
            "(Celery beat runs this every five minutes). Safe to run again.")

    def handle(self, *args, **options):
        run = evaluate_alerts(timezone.now())
        for alert in run.opened:
            self.stdout.write(f"opened   {alert.kind:<18} {alert.subject}: {alert.message}")
        for alert in run.resolved:
            self.stdout.write(f"resolved {alert.kind:<18} {alert.subject}")
        self.stdout.write(f"{len(run.opened)} opened, {len(run.resolved)} resolved.")
