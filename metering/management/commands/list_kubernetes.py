from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from metering.models import Cluster
from metering.schedulers.kubernetes import lister


class Command(AuditedCommand):
    help = (
        "Read the waiting work of every Kubernetes cluster with an API address (or one named): "
        "Kueue's Workloads, or pods, kept as the floor's waits. Beat does it every "
        "KUBERNETES_LIST_SECONDS; running it again adds nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="one cluster's name (default: all with an API)")

    def handle(self, *args, cluster: str | None, **options):
        targets = lister.clusters()
        if cluster:
            targets = [c for c in targets if c.name == cluster]
            if not targets:
                known = Cluster.objects.filter(name=cluster).first()
                raise CommandError(f"No cluster named {cluster}." if known is None else
                                   f"{cluster} is not a Kubernetes cluster with an API address.")
        if not targets:
            raise CommandError("No Kubernetes cluster has an API address: set one in the "
                               "admin (Clusters).")
        failed = []
        for target in targets:
            try:
                done = lister.list_once(target, now=timezone.now())
            except lister.KubernetesError as error:
                failed.append(str(error))
                self.stderr.write(str(error))
                continue
            self.stdout.write(f"{target.name}: {done.read} objects asking for GPUs read, "
                              f"{done.stored.new} new, {done.stored.updated} updated, "
                              f"{done.gone} gone since the last pass.")
        if failed:
            raise CommandError(f"{len(failed)} of {len(targets)} clusters could not be read.")
