from django.utils import timezone

from core.audit import AuditedCommand
from loans.maths import forecast
from loans.services.ledger import forecasting


class Command(AuditedCommand):
    help = ("Measure how often the burn-down's P10-P90 band held the outcome on the fleet's "
            "last weeks of rolling origins, per horizon, and store it for the pages (Celery beat "
            "runs this daily). Safe to run again: a day's measure is replaced.")

    def handle(self, *args, **options):
        self.stdout.write(f"Replaying the band over the last {forecast.CHECKED} days of every "
                          "team...")
        measured = forecasting.measure_coverage(timezone.now())
        for bucket, found in measured.items():
            said = (f"{found.share:.0%}" if found.measured
                    else f"too few to say (under {forecast.MIN_FORECASTS})")
            self.stdout.write(f"{bucket:>6} days left: {found.inside} of {found.forecasts} "
                              f"forecasts inside, {said}")
