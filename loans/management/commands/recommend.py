import time

from django.utils import timezone

from core.audit import AuditedCommand
from loans.services.advice.standalone import refresh_recommendations


class Command(AuditedCommand):
    help = ("Recommend commitments, quotas and plans for every active contract from its usage "
            "history (Celery beat runs this daily). Safe to run again.")

    def handle(self, *args, **options):
        started = time.perf_counter()
        run = refresh_recommendations(timezone.now())
        self.stdout.write(
            f"{run.contracts} contracts: {run.created} recommendations created, {run.updated} "
            f"updated, {run.superseded} superseded in {time.perf_counter() - started:.1f} s.")
