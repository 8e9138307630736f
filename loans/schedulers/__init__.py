"""What gpuloans enforces on each scheduler, one folder a scheduler (slurm/, kubernetes/),
behind one protocol (loans.schedulers.protocol.Enforcer), found by the cluster's kind: the
mirror of metering.schedulers, which reads what each scheduler's accounting says. A new
scheduler is a folder here, one in metering/schedulers and one in agent/holders."""

from loans.schedulers.kubernetes.enforcer import Kubernetes
from loans.schedulers.protocol import Enforcer
from loans.schedulers.slurm.enforcer import Slurm

ENFORCERS: dict[str, type] = {"slurm": Slurm, "kubernetes": Kubernetes}


def for_kind(kind: str) -> Enforcer | None:
    """The enforcer of clusters of this kind (metering's Cluster.kind), if gpuloans has one."""
    enforcer = ENFORCERS.get(kind)
    return enforcer() if enforcer else None
