from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from loans import schedulers
from metering.usage.slurm import find_slurm_cluster


class Command(AuditedCommand):
    help = (
        "Make each tenant's Slurm account carry its contract: GrpTRES=gres/gpu=<base quota "
        "plus the bursts granted now> on the account (its account rule's value); where no "
        "contract runs, the limit the account had before (an account gpuloans never held is "
        "never changed); with SLURM_ADMISSION on, each period's commitment and its "
        "overage policy as GPU-minute budgets (QOS GrpTRESMins). Only differences are changed; "
        "each change is logged (admin: Slurm limit changes). Kubernetes quotas are manifests: "
        "see quota_manifests."
    )

    def add_arguments(self, parser):
        parser.add_argument("--slurm", action="store_true", help="apply to Slurm (sacctmgr)")
        parser.add_argument("--cluster", help="the gpuloans cluster (default: the only Slurm "
                                              "cluster)")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the sacctmgr commands without running them")

    def handle(self, *args, slurm: bool, cluster: str | None, dry_run: bool, **options):
        if not slurm:
            raise CommandError("Say --slurm: Slurm is the scheduler whose limits this sets; "
                               "for Kubernetes, apply the output of quota_manifests.")
        try:
            target = find_slurm_cluster(cluster)
        except LookupError as error:
            raise CommandError(str(error)) from None
        enforcer = schedulers.for_kind("slurm")
        try:
            changes = enforcer.apply(target.pk, target.name, at=timezone.now(), dry_run=dry_run)
        except enforcer.errors as error:
            raise CommandError(str(error)) from None
        if not changes:
            self.stdout.write(self.style.SUCCESS(f"{target.name}: every account carries its "
                                                 "contract already."))
            return
        for change in changes:
            command = " ".join(change.command) if change.command else "(by hand)"
            self.stdout.write(f"{change.account}: {change.what}\n    {command}")
        verb = "would be made" if dry_run else "made"
        self.stdout.write(self.style.SUCCESS(f"{len(changes)} changes {verb}."))
