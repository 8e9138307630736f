"""Slurm's commands as gpuloans runs them (sacctmgr, squeue, scontrol): run with a time limit,
their failures as LimitsError, and one change to make, for people and for the log."""

import subprocess
from collections.abc import Callable
from datetime import datetime

from loans.models import Contract
from loans.schedulers.protocol import EnforcementError
from metering.usage.fleet import slurm_accounts

TIMEOUT_S = 60
Run = Callable[[list[str]], subprocess.CompletedProcess]


class LimitsError(EnforcementError):
    """A Slurm command could not be run or read."""


def run_slurm(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)  # noqa: S603


def slurm(run: Run, *command: str) -> str:
    """What `command` printed; LimitsError, with the last line it said, where it failed."""
    try:
        done = run(list(command))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LimitsError(f"{command[0]}: {error}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise LimitsError(f"{' '.join(command[:4])} failed: "
                          f"{said[-1] if said else done.returncode}")
    return done.stdout


def sacctmgr(run: Run, *args: str) -> str:
    return slurm(run, "sacctmgr", *args)


def accounts_at(cluster_id: int, at: datetime) -> list[tuple[int, str, Contract | None]]:
    """(tenant id, Slurm account, the tenant's contract running at `at` or None) for each
    account rule of the cluster: what both the quota limits and the budgets are made from."""
    running: dict[int, Contract] = {}
    for contract in Contract.objects.filter(status=Contract.Status.ACTIVE).select_related(
            "plan"):
        if contract.period_at(at) is not None:
            running[contract.tenant_id] = contract
    return [(tenant_id, account, running.get(tenant_id))
            for tenant_id, account in slurm_accounts(cluster_id)]
