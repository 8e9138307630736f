"""Contracts into Slurm's limits: each tenant's Slurm account carries its contract, and Slurm
enforces it (AccountingStorageEnforce=limits).

- The account's `GrpTRES=gres/gpu=<quota>`, the one quota every scheduler carries
  (bursts.effective_quota: the base plus the bursts granted now, never past the max quota),
  from the terms in force now. A burst raises the account's limit while it lasts, so it binds
  every job of the account, not only those that ask for a QOS.
- An account's limit as it was before gpuloans held it (set by hand, or none) is kept
  (SlurmAccountHold) and restored when no contract runs; an account gpuloans does not hold is
  never changed, and one changed by hand since gpuloans set it is left as it is.
- QOS `gpuloans-burst-<account>`, which earlier versions gave a burst, is taken back and
  removed.

A tenant's account is the value of its account rules in the Slurm cluster. What the accounts
carry now is read with `sacctmgr show`; only the differences are changed (`sacctmgr -i
modify/add/delete`), so a second run changes nothing. Each change applied is kept
(SlurmLimitChange, shown in the admin), with the command and what sacctmgr said.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from loans.models import SlurmAccountHold, SlurmLimitChange
from loans.schedulers.protocol import Change
from loans.schedulers.slurm import budgets
from loans.schedulers.slurm.commands import (
    LimitsError,
    Run,
    accounts_at,
    run_slurm,
    sacctmgr,
    slurm,
)
from loans.services import bursts
from metering.schedulers import gpu_count

QOS_PREFIX = "gpuloans-burst-"  # what earlier versions gave a burst; taken back where found


@dataclass(frozen=True)
class Wanted:
    account: str
    tenant_id: int
    gpus: int | None  # the quota; None: no contract runs, so the account is given back

    @property
    def qos(self) -> str:
        return f"{QOS_PREFIX}{self.account}"


@dataclass(frozen=True)
class Carried:
    """What an account carries in Slurm now."""

    max_gpus: int | None
    qos: frozenset[str]


@dataclass(frozen=True)
class Held:
    """An account gpuloans holds: its limit before, and the one gpuloans last set."""

    hand_set: int | None
    ours: int | None


def wanted(cluster_id: int, at: datetime) -> list[Wanted]:
    """What each tenant's account in the cluster should carry at `at`."""
    out = []
    for tenant_id, account, contract in accounts_at(cluster_id, at):
        gpus = None if contract is None else bursts.effective_quota(contract, at)[0]
        out.append(Wanted(account, tenant_id, gpus))
    return out


def _gpus(tres: str) -> int | None:
    """An account's GPU limit from its GrpTRES (Slurm's one TRES reader); None if it has none
    or one that is not a count."""
    try:
        return gpu_count(tres)
    except ValueError:
        return None


def carried(accounts: list[str], run: Run = run_slurm) -> tuple[dict[str, Carried], set[str]]:
    """What the accounts carry now (account-level associations), and the names of the burst
    QOS earlier versions made."""
    out = {}
    text = sacctmgr(run, "-n", "-P", "show", "assoc", f"account={','.join(accounts)}",
                     "format=Account,User,GrpTRES,QOS")
    for line in text.splitlines():
        account, user, tres, qos = (line.split("|") + ["", "", "", ""])[:4]
        if not user and account in accounts:
            out[account] = Carried(_gpus(tres), frozenset(q for q in qos.split(",") if q))
    old = {line.partition("|")[0] for line in sacctmgr(
        run, "-n", "-P", "show", "qos", "format=Name").splitlines()}
    return out, {name for name in old if name.startswith(QOS_PREFIX)}


def held_accounts(cluster: str) -> dict[str, Held]:
    return {h.account: Held(h.hand_set_gpus, h.set_gpus)
            for h in SlurmAccountHold.objects.filter(cluster=cluster)}


def _limit(account: str, tenant_id: int, before: int | None, after: int | None,
           why: str = "") -> Change:
    value = -1 if after is None else after  # -1 clears a limit
    return Change(account, tenant_id, f"GrpTRES gres/gpu {_shown(before)} -> {_shown(after)}{why}",
                  ("sacctmgr", "-i", "modify", "account", "where", f"name={account}", "set",
                   f"GrpTRES=gres/gpu={value}"))


def plan(wants: list[Wanted], now: dict[str, Carried], old_qos: set[str],
         held: dict[str, Held] | None = None) -> list[Change]:
    """The sacctmgr commands that make the accounts carry what they should: a running
    contract's quota replaces whatever the account carried; where none runs, an account
    gpuloans holds gets back its limit from before, unless it was changed by hand since."""
    held = held or {}
    changes = []
    for want in wants:
        account, carries = want.account, now.get(want.account)
        if carries is None:
            if want.gpus is not None:
                changes.append(Change(account, want.tenant_id, "missing in Slurm: add the "
                                      "account (sacctmgr add account) and its users", ()))
            continue
        hold = held.get(account)
        if want.gpus is not None and carries.max_gpus != want.gpus:
            why = "" if hold else f" (the contract's; {_shown(carries.max_gpus)} kept)"
            changes.append(_limit(account, want.tenant_id, carries.max_gpus, want.gpus, why))
        elif (want.gpus is None and hold is not None and carries.max_gpus == hold.ours
              and hold.hand_set != carries.max_gpus):
            changes.append(_limit(account, want.tenant_id, carries.max_gpus, hold.hand_set,
                                  " (no contract runs: the limit from before)"))
        if want.qos in carries.qos:
            changes.append(Change(account, want.tenant_id, f"burst QOS {want.qos} taken back",
                                  ("sacctmgr", "-i", "modify", "account", "where",
                                   f"name={account}", "set", f"QOS-={want.qos}")))
        if want.qos in old_qos:
            changes.append(Change(account, want.tenant_id, f"burst QOS {want.qos} removed",
                                  ("sacctmgr", "-i", "delete", "qos", want.qos)))
    return changes


def _shown(gpus: int | None) -> str:
    return "none" if gpus is None else str(gpus)


def keep_holds(cluster: str, wants: list[Wanted], now: dict[str, Carried],
               failed: set[str], at: datetime) -> None:
    """After the changes: hold each account whose contract's limit it now carries (keeping
    what it carried before, the first time), and let go of those no contract holds."""
    for want in wants:
        carries = now.get(want.account)
        if carries is None or want.account in failed:
            continue
        if want.gpus is None:
            SlurmAccountHold.objects.filter(cluster=cluster, account=want.account).delete()
            continue
        hold, made = SlurmAccountHold.objects.get_or_create(
            cluster=cluster, account=want.account,
            defaults={"hand_set_gpus": carries.max_gpus, "set_gpus": want.gpus, "since": at})
        if not made and hold.set_gpus != want.gpus:
            hold.set_gpus = want.gpus
            hold.save(update_fields=["set_gpus"])


def apply_limits(*, cluster_id: int, cluster_name: str, at: datetime, dry_run: bool,
                 run: Run = run_slurm, admission: bool | None = None) -> list[Change]:
    """Plan the changes and, unless `dry_run`, make them, logging each. With `admission`
    (SLURM_ADMISSION when None), the commitments and overage policies as GPU-minute budgets
    too (loans.schedulers.slurm.budgets)."""
    wants = wanted(cluster_id, at)
    if not wants:
        return []
    now, old_qos = carried([w.account for w in wants], run)
    changes = plan(wants, now, old_qos, held_accounts(cluster_name))
    if settings.SLURM_ADMISSION if admission is None else admission:
        held = budgets.wanted(cluster_id, at)
        if held:
            changes += budgets.plan(held, *budgets.carried(held, run))
    if dry_run:
        return changes
    failed = set()
    for change in changes:
        if not change.command:
            continue
        try:
            said = slurm(run, *change.command)
            ok = True
        except LimitsError as error:
            said, ok = str(error), False
            failed.add(change.account)
        SlurmLimitChange.objects.create(
            at=at, cluster=cluster_name, account=change.account, tenant_id=change.tenant_id,
            change=change.what, command=" ".join(change.command), succeeded=ok,
            output=said.strip()[:2000])
    keep_holds(cluster_name, wants, now, failed, at)
    return changes
