from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from metering.intake.ingest import forget_gpus
from metering.models import Gpu, Node
from metering.services import gpu_move


class Command(AuditedCommand):
    help = ("Move a GPU (with its MIG instances and replicas) to another node, into another "
            "cluster too: the one way a GPU changes cluster. The node that reported it keeps "
            "its hours.")

    def add_arguments(self, parser):
        parser.add_argument("uuid", help="the GPU's uuid, or a MIG instance's or replica's")
        parser.add_argument("node", help="the node that has it now")

    def handle(self, *args, uuid: str, node: str, **options):
        gpu = Gpu.objects.filter(uuid=uuid).first()
        if gpu is None:
            raise CommandError(f"No GPU {uuid!r} has reported.")
        target = Node.objects.filter(name=node).first()
        if target is None:
            raise CommandError(f"No node {node!r}.")
        moved = gpu_move(gpu=gpu, node=target, now=timezone.now())
        forget_gpus()
        self.stdout.write(f"{moved} devices of {uuid} moved to {target.name} (cluster "
                          f"{target.cluster}).")
