"""Each scheduler the product meets, in a folder of its own (metering.schedulers.slurm), behind
one protocol, found by the kind of the cluster (metering.models.Cluster.kind).

A scheduler that keeps its own accounting is a second meter: its usage is imported beside the
agents' and reconciled with it (metering.usage.slurm). Kubernetes keeps none (its pods are
learnt by the agent from the kubelet), nor does a plain cluster: for them there is none.

This module is the face loans reads schedulers through: the protocol, and Slurm's pure
readers of its accounting formats (GPU counts in TRES, seconds spread over hours), which the
enforcement and the advice's history upload read too.
"""

from datetime import datetime
from typing import Protocol

from metering.models import Cluster
from metering.schedulers.slurm.accounting import Slurm
from metering.schedulers.slurm.sacct import gpu_count, gpus_of, spread_seconds

__all__ = ["Scheduler", "Slurm", "for_cluster", "gpu_count", "gpus_of", "spread_seconds"]


class Scheduler(Protocol):
    kind: str
    errors: tuple[type[Exception], ...]  # what an import that failed for now raises

    def import_usage(self, cluster: Cluster, *, now: datetime, since: datetime | None = None,
                     days: int = 35): ...


def for_cluster(cluster: Cluster) -> Scheduler | None:
    """The scheduler whose accounting this cluster's usage can be imported from, if any."""
    return {"slurm": Slurm()}.get(cluster.kind)
