from django.conf import settings
from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from metering import schedulers
from metering.management.commands.recount_rollups import moment
from metering.usage.slurm import find_slurm_cluster


class Command(AuditedCommand):
    help = (
        "Import what Slurm accounting (sacct, from slurmdbd) says each job held: GPU-hours per "
        "account, user and hour, kept beside the agents' meter for the cluster; and the jobs "
        "that waited for GPUs, for the floor's measure. Run it where Slurm's client commands "
        "reach the cluster. Running it again adds nothing; a job that was running is "
        "completed when it has ended."
    )

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="the gpuloans cluster (default: the only Slurm "
                                              "cluster)")
        parser.add_argument("--since", help="read jobs from here (ISO 8601; default: where the "
                                            "last import left off, else SLURM_IMPORT_DAYS ago)")

    def handle(self, *args, cluster: str | None, since: str | None, **options):
        try:
            target = find_slurm_cluster(cluster)
        except LookupError as error:
            raise CommandError(str(error)) from None
        start = moment(since, "since") if since else None
        now = timezone.now()
        if start is not None and start >= now:
            raise CommandError("--since must be in the past.")
        scheduler = schedulers.for_cluster(target)
        if scheduler is None:
            raise CommandError(f"{target.name} is a {target.get_kind_display()} cluster: its "
                               "scheduler keeps no accounting to import.")
        try:
            done = scheduler.import_usage(target, now=now, since=start,
                                          days=settings.SLURM_IMPORT_DAYS)
        except scheduler.errors as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(
            f"{target.name}: {done.read} jobs with GPUs read, {done.new} new, {done.completed} "
            f"completed since the last import; {done.hours} account-hours rebuilt; "
            f"{done.waited.read} jobs that waited for GPUs read, {done.waited.new} new, "
            f"{done.waited.updated} updated."))
