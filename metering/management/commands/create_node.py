from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from core.audit import AuditedCommand
from metering.models import Cluster, tenant_model
from metering.services import node_create, validation_message


class Command(AuditedCommand):
    help = "Register a GPU node and print its agent token (shown once, stored hashed)."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the node's name, as its agent reports it")
        parser.add_argument("--tenant", metavar="SLUG", help="tenant that gets unclaimed usage")
        parser.add_argument("--cluster", metavar="NAME",
                            help="the node's cluster, created if new (default: default)")

    def handle(self, *args, name: str, tenant: str | None, cluster: str | None, **options):
        default_tenant = None
        if tenant:
            tenants = tenant_model().objects
            default_tenant = tenants.filter(slug=tenant).first()
            if default_tenant is None:
                known = ", ".join(tenants.values_list("slug", flat=True)) or "none yet"
                raise CommandError(f"No tenant {tenant!r} (known: {known}).")
        try:
            where = None
            if cluster:
                where = Cluster(name=cluster)
                where.full_clean(validate_unique=False)
                where = Cluster.objects.get_or_create(name=cluster)[0]
            node, token = node_create(name=name, default_tenant=default_tenant, cluster=where)
        except ValidationError as error:
            reason = validation_message(error)
            raise CommandError(f"Cannot create node {name!r}: {reason}") from None
        self.stderr.write(
            f"Node {node.name} created in cluster {node.cluster}. Its token follows; it is shown "
            "only now. Store it in a file readable only by the agent and pass --token-file."
        )
        self.stdout.write(token)
