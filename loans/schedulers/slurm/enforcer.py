"""Slurm as gpuloans enforces contracts on it (loans.schedulers.protocol.Enforcer): the
accounts' GPU limits (limits), and with SLURM_ADMISSION the periods' budgets and holds
(budgets), by sacctmgr and scontrol."""

from datetime import datetime

from loans.schedulers.protocol import Change
from loans.schedulers.slurm.commands import LimitsError, Run, run_slurm
from loans.schedulers.slurm.limits import apply_limits


class Slurm:
    kind = "slurm"
    errors = (LimitsError,)

    def __init__(self, run: Run = run_slurm):
        self.run = run

    def apply(self, cluster_id: int, cluster_name: str, *, at: datetime,
              dry_run: bool) -> list[Change]:
        return apply_limits(cluster_id=cluster_id, cluster_name=cluster_name, at=at,
                            dry_run=dry_run, run=self.run)
