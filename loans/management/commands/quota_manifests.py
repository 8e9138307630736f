from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from loans.models import Tenant
from loans.schedulers.kubernetes.manifests import all_manifests


class Command(AuditedCommand):
    help = ("Print every tenant's GPU quota (base plus the bursts granted now) as a Kubernetes "
            "ResourceQuota and a Kueue ClusterQueue, one YAML stream for kubectl apply -f -.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", action="append", help="only this tenant (repeatable)")

    def handle(self, *args, **options):
        tenants = Tenant.objects.all()
        if options["tenant"]:
            tenants = tenants.filter(slug__in=options["tenant"])
            missing = set(options["tenant"]) - set(tenants.values_list("slug", flat=True))
            if missing:
                raise CommandError(f"No such tenant: {', '.join(sorted(missing))}.")
        self.stdout.write(all_manifests(timezone.now(), tenants), ending="")
