"""Contracts into Slurm's limits: each tenant's Slurm account carries its contract, and Slurm
enforces it (AccountingStorageEnforce=limits).

- The account's `GrpTRES=gres/gpu=<max quota>`, from the terms in force now; no limit where the
  tenant has no contract running (after its end, or before its start).
- A QOS `gpuloans-burst-<account>` with `GrpTRES=gres/gpu=<GPUs of the bursts granted now>`,
  on the account's QOS list while a burst is granted, gone when none is (a burst never
  outlasts its contract).

A tenant's account is the value of its account rules in the Slurm cluster. What the accounts
carry now is read with `sacctmgr show`; only the differences are changed (`sacctmgr -i
modify/add/delete`), so a second run changes nothing. Each change applied is kept
(SlurmLimitChange, shown in the admin), with the command and what sacctmgr said.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from loans.models import SlurmLimitChange
from loans.services import admission as budgets
from loans.services import bursts
from loans.services.slurm_commands import (
    Change,
    LimitsError,
    Run,
    accounts_at,
    run_slurm,
    sacctmgr,
    slurm,
)
from metering.schedulers.slurm.sacct import gpu_count

QOS_PREFIX = "gpuloans-burst-"
@dataclass(frozen=True)
class Wanted:
    account: str
    tenant_id: int
    max_gpus: int | None  # None: no limit
    burst_gpus: int  # 0: no burst QOS

    @property
    def qos(self) -> str:
        return f"{QOS_PREFIX}{self.account}"


@dataclass(frozen=True)
class Carried:
    """What an account carries in Slurm now."""

    max_gpus: int | None
    qos: frozenset[str]


def wanted(cluster_id: int, at: datetime) -> list[Wanted]:
    """What each tenant's account in the cluster should carry at `at`."""
    out = []
    for tenant_id, account, contract in accounts_at(cluster_id, at):
        if contract is None:
            out.append(Wanted(account, tenant_id, None, 0))
            continue
        effective, cap = bursts.effective_quota(contract, at)
        base = contract.terms_at(at).base_quota_gpus
        out.append(Wanted(account, tenant_id, cap, effective - base))
    return out


def _gpus(tres: str) -> int | None:
    """An account's GPU limit from its GrpTRES (Slurm's one TRES reader); None if it has none
    or one that is not a count."""
    try:
        return gpu_count(tres)
    except ValueError:
        return None


def carried(accounts: list[str], run: Run = run_slurm) -> tuple[dict[str, Carried], dict[str, int]]:
    """What the accounts carry now (account-level associations), and the GPUs of every
    gpuloans burst QOS."""
    out = {}
    text = sacctmgr(run, "-n", "-P", "show", "assoc", f"account={','.join(accounts)}",
                     "format=Account,User,GrpTRES,QOS")
    for line in text.splitlines():
        account, user, tres, qos = (line.split("|") + ["", "", "", ""])[:4]
        if not user and account in accounts:
            out[account] = Carried(_gpus(tres), frozenset(q for q in qos.split(",") if q))
    qos_gpus = {}
    for line in sacctmgr(run, "-n", "-P", "show", "qos", "format=Name,GrpTRES").splitlines():
        name, _, tres = line.partition("|")
        if name.startswith(QOS_PREFIX):
            qos_gpus[name] = _gpus(tres) or 0
    return out, qos_gpus


def plan(wants: list[Wanted], now: dict[str, Carried], qos_gpus: dict[str, int]
         ) -> list[Change]:
    """The sacctmgr commands that make the accounts carry what they should."""
    changes = []
    for want in wants:
        account, held = want.account, now.get(want.account)
        if held is None:
            changes.append(Change(account, want.tenant_id, "missing in Slurm: add the account "
                                  "(sacctmgr add account) and its users", ()))
            continue
        if held.max_gpus != want.max_gpus:
            value = -1 if want.max_gpus is None else want.max_gpus
            changes.append(Change(
                account, want.tenant_id,
                f"GrpTRES gres/gpu {_shown(held.max_gpus)} -> {_shown(want.max_gpus)}",
                ("sacctmgr", "-i", "modify", "account", "where", f"name={account}", "set",
                 f"GrpTRES=gres/gpu={value}")))
        qos, exists = want.qos, want.qos in qos_gpus
        if want.burst_gpus:
            if not exists:
                changes.append(Change(account, want.tenant_id,
                                      f"burst QOS {qos} added: {want.burst_gpus} GPUs",
                                      ("sacctmgr", "-i", "add", "qos", qos,
                                       f"GrpTRES=gres/gpu={want.burst_gpus}")))
            elif qos_gpus[qos] != want.burst_gpus:
                changes.append(Change(
                    account, want.tenant_id,
                    f"burst QOS {qos} GPUs {qos_gpus[qos]} -> {want.burst_gpus}",
                    ("sacctmgr", "-i", "modify", "qos", "where", f"name={qos}", "set",
                     f"GrpTRES=gres/gpu={want.burst_gpus}")))
            if qos not in held.qos:
                changes.append(Change(account, want.tenant_id, f"burst QOS {qos} given",
                                      ("sacctmgr", "-i", "modify", "account", "where",
                                       f"name={account}", "set", f"QOS+={qos}")))
        else:
            if qos in held.qos:
                changes.append(Change(account, want.tenant_id, f"burst QOS {qos} taken back",
                                      ("sacctmgr", "-i", "modify", "account", "where",
                                       f"name={account}", "set", f"QOS-={qos}")))
            if exists:
                changes.append(Change(account, want.tenant_id, f"burst QOS {qos} removed",
                                      ("sacctmgr", "-i", "delete", "qos", qos)))
    return changes


def _shown(gpus: int | None) -> str:
    return "none" if gpus is None else str(gpus)


def apply_limits(*, cluster_id: int, cluster_name: str, at: datetime, dry_run: bool,
                 run: Run = run_slurm, admission: bool | None = None) -> list[Change]:
    """Plan the changes and, unless `dry_run`, make them, logging each. With `admission`
    (SLURM_ADMISSION when None), the commitments and overage policies as GPU-minute budgets
    too (loans.services.admission)."""
    wants = wanted(cluster_id, at)
    if not wants:
        return []
    now, qos_gpus = carried([w.account for w in wants], run)
    changes = plan(wants, now, qos_gpus)
    if settings.SLURM_ADMISSION if admission is None else admission:
        held = budgets.wanted(cluster_id, at)
        if held:
            changes += budgets.plan(held, *budgets.carried(held, run))
    if dry_run:
        return changes
    for change in changes:
        if not change.command:
            continue
        try:
            said = slurm(run, *change.command)
            ok = True
        except LimitsError as error:
            said, ok = str(error), False
        SlurmLimitChange.objects.create(
            at=at, cluster=cluster_name, account=change.account, tenant_id=change.tenant_id,
            change=change.what, command=" ".join(change.command), succeeded=ok,
            output=said.strip()[:2000])
    return changes
