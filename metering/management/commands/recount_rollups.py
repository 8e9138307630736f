from datetime import datetime, timedelta

from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.audit import AuditedCommand
from metering.recount import rebuild_rollups
from metering.usage import floor_hour


def moment(raw: str, name: str) -> datetime:
    try:
        value = parse_datetime(raw)
    except ValueError:
        value = None
    if value is None:
        raise CommandError(f"--{name} {raw!r} is not a date-time (e.g. 2026-11-01T00:00+08:00).")
    return value if timezone.is_aware(value) else timezone.make_aware(value)


class Command(AuditedCommand):
    help = (
        "Rebuild hourly rollups from the raw samples, a day at a time (after a manual fix or a "
        "restore). Only hours whose raw samples are still retained are recounted; earlier hours "
        "keep their rollups."
    )

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="first hour (ISO 8601)")
        parser.add_argument("--until", help="end, exclusive (ISO 8601; default now)")

    def handle(self, *args, since: str, until: str | None, **options):
        start = floor_hour(moment(since, "since"))
        end = moment(until, "until") if until else timezone.now()
        if end <= start:
            raise CommandError("--until must be after --since.")
        day, total, kept = start, 0, []
        while day < end:
            step_end = min(day + timedelta(days=1), end)
            recount = rebuild_rollups(day, step_end)
            total += recount.samples
            if recount.kept:
                kept.append(recount.kept)
            self.stdout.write(f"  {day:%Y-%m-%d %H:%M} .. {step_end:%Y-%m-%d %H:%M}: {total}"
                              + (" (kept as they were)" if recount.kept else ""))
            day = step_end
        if kept:
            self.stdout.write(self.style.WARNING(
                f"Rollups from {kept[0][0]:%Y-%m-%d %H:%M} to {kept[-1][1]:%Y-%m-%d %H:%M} were "
                "kept as they were: their raw samples were purged (rollups are kept forever)."))
        self.stdout.write(self.style.SUCCESS(f"Recounted {total} samples."))
