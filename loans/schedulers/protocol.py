"""What every scheduler's enforcement answers to (loans.schedulers: one folder a scheduler,
mirroring metering.schedulers): the changes that make it carry the ledger, each said for
people and, where gpuloans runs it, as the command that makes it."""

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Change:
    account: str  # the scheduler's name for the tenant: a Slurm account, a namespace
    tenant_id: int | None
    what: str  # for people: "GrpTRES gres/gpu 8 -> 16"
    command: tuple[str, ...]  # empty: made by hand (or by kubectl from a manifest)


class EnforcementError(Exception):
    """The scheduler could not be asked or changed; nothing half-done is recorded as done."""


class Enforcer(Protocol):
    """A scheduler as gpuloans enforces contracts on it: each tenant's quota (the base plus
    the bursts granted now), each period's commitment and overage policy as budgets where
    the scheduler keeps them, work held while a policy holds it, and what an account carried
    before gpuloans held it restored once no contract runs."""

    kind: str  # metering's Cluster.kind it enforces on
    errors: tuple[type[Exception], ...]

    def apply(self, cluster_id: int, cluster_name: str, *, at: datetime,
              dry_run: bool) -> list[Change]:
        """The changes that make the cluster carry every contract at `at`; made unless
        `dry_run` (those with a command), each logged."""
