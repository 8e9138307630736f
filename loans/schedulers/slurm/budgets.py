"""Admission from the ledger on Slurm: each account's period commitment, and what its overage
policy allows past it, as GPU-minute budgets Slurm enforces itself (DESIGN.md, "Admission from
the ledger"). Run by apply_quotas --slurm with SLURM_ADMISSION on, beside the quota limits
(loans.schedulers.slurm.limits).

Per account of a tenant with a contract running:

- QOS `gpuloans-commit-<account>`: `GrpTRESMins=gres/gpu=<the period's committed GPU-hours x
  60>`, `Flags=NoDecay`, Slurm counting its own use; the account's default QOS.
- QOS `gpuloans-overage-<account>`: the policy's overage budget in GPU-minutes (none for hold,
  no limit for allow), lower priority.
- At each period's start both QOS's use is reset (`RawUsage=0`): their Description names the
  period they count, so a run that finds another period there resets them. gpuloans never
  subtracts its metered use from Slurm's count (that would count each hour twice).
- A job pending on the commitment's GPU-minutes (`QOSGrpGRESMinutes`) is moved to the overage
  QOS when the policy lets it run there, and the overage QOS becomes the account's default;
  with hold, jobs pend with Slurm's own reason. At the next period the default is the
  commitment's QOS again, and the jobs pending in the overage QOS go back to it.

With `AccountingStorageEnforce=...,safe`, Slurm starts no job whose time limit x GPUs could
pass what is left, so no job is killed and none passes a budget: jobs need a time limit (a
partition's DefaultTime). Slurm counts a MIG instance as a whole GPU: on MIG nodes a slice's
minute spends a whole GPU-minute of the budget, more than the ledger bills for it.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from loans.maths import admission
from loans.models import policy_of
from loans.schedulers.protocol import Change
from loans.schedulers.slurm.commands import Run, accounts_at, run_slurm, sacctmgr, slurm
from metering.schedulers import gpu_count

COMMIT, OVERAGE = admission.COMMIT_QOS, admission.OVERAGE_QOS
WAITING = "QOSGrpGRESMinutes"  # the reason of a job pending on a QOS's GPU-minutes
COMMIT_PRIORITY, OVERAGE_PRIORITY = 10, 0  # overage jobs start after committed ones


@dataclass(frozen=True)
class Wanted:
    account: str
    tenant_id: int
    period: str  # the period the QOS count, as their Description says it
    limits: admission.Budgets | None  # None: no contract runs, the QOS are taken away

    @property
    def commit(self) -> str:
        return f"{COMMIT}{self.account}"

    @property
    def overage(self) -> str:
        return f"{OVERAGE}{self.account}"

    @property
    def overage_allowed(self) -> bool:
        return self.limits is not None and self.limits.overage_minutes != 0


@dataclass(frozen=True)
class Qos:
    minutes: int | None  # None: no limit
    period: str


@dataclass(frozen=True)
class Account:
    qos: frozenset[str]
    default: str
    waiting: tuple[tuple[str, str], ...]  # (job id, QOS) of jobs pending on GPU-minutes


def wanted(cluster_id: int, at: datetime) -> list[Wanted]:
    """The budgets each account with a contract running at `at` should carry."""
    out = []
    for tenant_id, account, contract in accounts_at(cluster_id, at):
        if contract is None:  # ended (or not begun): what gpuloans set is taken away
            out.append(Wanted(account, tenant_id, "", None))
            continue
        period, terms = contract.period_at(at), contract.terms_at(at)
        policy, budget = policy_of(contract)
        out.append(Wanted(account, tenant_id,
                          f"gpuloans period {period.start.astimezone(UTC):%Y-%m-%dT%H:%MZ}",
                          admission.budgets(committed_gpu_hours=terms.committed_gpu_hours,
                                            overage_rate=terms.overage_rate, policy=policy,
                                            budget=budget)))
    return out


def _minutes(tres: str) -> int | None:
    """A QOS's GPU-minutes from its GrpTRESMins (Slurm's one TRES reader); None where it
    has no limit (Slurm shows none) or one that cannot be read."""
    try:
        return gpu_count(tres) if tres else None
    except ValueError:
        return None


def carried(wants: list[Wanted], run: Run = run_slurm) -> tuple[dict[str, Qos], dict[str, Account]]:
    """Our QOS as Slurm holds them, and each account's QOS list, default QOS and the jobs
    pending on GPU-minutes."""
    qos = {}
    for line in sacctmgr(run, "-n", "-P", "show", "qos",
                         "format=Name,GrpTRESMins,Description").splitlines():
        name, tres, description = (line.split("|") + ["", ""])[:3]
        if name.startswith((COMMIT, OVERAGE)):
            qos[name] = Qos(_minutes(tres), description)
    accounts = {}
    names = [w.account for w in wants]
    for line in sacctmgr(run, "-n", "-P", "show", "assoc", f"account={','.join(names)}",
                         "format=Account,User,QOS,DefaultQOS").splitlines():
        account, user, listed, default = (line.split("|") + ["", "", ""])[:4]
        if not user and account in names:
            accounts[account] = Account(frozenset(q for q in listed.split(",") if q), default,
                                        ())
    waiting = _waiting(run, names)
    return qos, {name: Account(a.qos, a.default, waiting.get(name, ())) for name, a in
                 accounts.items()}


def _waiting(run: Run, accounts: list[str]) -> dict[str, tuple[tuple[str, str], ...]]:
    out: dict[str, list] = {}
    printed = slurm(run, "squeue", "-h", "-t", "PD", "-A", ",".join(accounts), "-o",
                    "%i|%a|%q|%r")
    for line in printed.splitlines():
        job, account, qos, reason = (line.split("|") + ["", "", ""])[:4]
        if reason == WAITING:
            out.setdefault(account, []).append((job, qos))
    return {account: tuple(jobs) for account, jobs in out.items()}


def plan(wants: list[Wanted], qos: dict[str, Qos], accounts: dict[str, Account]
         ) -> list[Change]:
    """The sacctmgr and scontrol commands that make each account carry its budgets."""
    changes = []
    for want in wants:
        account = accounts.get(want.account)
        if account is None:
            continue  # slurm_limits says what is missing
        if want.limits is None:
            changes += _taken_away(want, qos, account)
            continue
        new_period = any(qos.get(name) is not None  # sacctmgr keeps it in lower case
                         and qos[name].period.lower() != want.period.lower()
                         for name in (want.commit, want.overage))
        for name, minutes, priority in (
                (want.commit, want.limits.commitment_minutes, COMMIT_PRIORITY),
                (want.overage, want.limits.overage_minutes, OVERAGE_PRIORITY)):
            changes += _qos(want, name, minutes, priority, qos.get(name), new_period)
        listed = {want.commit, want.overage} - account.qos
        moved = [job for job, q in account.waiting if q == want.commit]
        spent = bool(moved) and want.overage_allowed and not new_period
        default = want.overage if spent or (
            account.default == want.overage and want.overage_allowed and not new_period) \
            else want.commit
        if listed or account.default != default:
            changes.append(Change(
                want.account, want.tenant_id,
                f"default QOS {account.default or 'none'} -> {default}"
                + (f", given {', '.join(sorted(listed))}" if listed else ""),
                ("sacctmgr", "-i", "modify", "account", "where", f"name={want.account}", "set",
                 *([f"QOS+={','.join(sorted(listed))}"] if listed else []),
                 f"DefaultQOS={default}")))
        if spent:
            changes += [_move(want, job, want.overage, "the commitment is spent")
                        for job in moved]
        if new_period:
            changes += [_move(want, job, want.commit, "a new period")
                        for job, q in account.waiting if q == want.overage]
    return changes


def _taken_away(want: Wanted, qos: dict[str, Qos], account: Account) -> list[Change]:
    """No contract runs for the account: its jobs waiting in our QOS go back to Slurm's
    `normal`, which is its default again, and our QOS are removed from it and deleted."""
    ours = {want.commit, want.overage}
    changes = [Change(want.account, want.tenant_id, f"job {job} moved to normal: no contract",
                      ("scontrol", "update", f"JobId={job}", "QOS=normal"))
               for job, q in account.waiting if q in ours]
    listed = sorted(ours & account.qos)
    if listed or account.default in ours:
        changes.append(Change(
            want.account, want.tenant_id, f"no contract: {', '.join(listed) or 'none'} taken "
            f"back, default QOS {account.default or 'none'} -> normal",
            ("sacctmgr", "-i", "modify", "account", "where", f"name={want.account}", "set",
             *([f"QOS-={','.join(listed)}"] if listed else []), "DefaultQOS=normal")))
    changes += [Change(want.account, want.tenant_id, f"QOS {name} removed: no contract",
                       ("sacctmgr", "-i", "delete", "qos", name))
                for name in sorted(ours) if name in qos]
    return changes


def _qos(want: Wanted, name: str, minutes: int | None, priority: int, held: Qos | None,
         new_period: bool) -> list[Change]:
    value = -1 if minutes is None else minutes
    settings = (f"GrpTRESMins=gres/gpu={value}", "Flags=NoDecay", f"Priority={priority}",
                f"Description={want.period}")
    shown = "no limit" if minutes is None else f"{minutes} GPU-minutes"
    if held is None:
        return [Change(want.account, want.tenant_id, f"QOS {name} added: {shown}",
                       ("sacctmgr", "-i", "add", "qos", name, "set", *settings))]
    out = []
    if held.minutes != minutes:
        out.append(Change(want.account, want.tenant_id,
                          f"QOS {name}: {'no limit' if held.minutes is None else held.minutes} "
                          f"-> {shown}",
                          ("sacctmgr", "-i", "modify", "qos", "where", f"name={name}", "set",
                           settings[0])))
    if new_period:
        out.append(Change(want.account, want.tenant_id,
                          f"QOS {name}: use reset for {want.period.removeprefix('gpuloans ')}",
                          ("sacctmgr", "-i", "modify", "qos", "where", f"name={name}", "set",
                           "RawUsage=0", settings[3])))
    return out


def _move(want: Wanted, job: str, qos: str, why: str) -> Change:
    return Change(want.account, want.tenant_id, f"job {job} moved to {qos}: {why}",
                  ("scontrol", "update", f"JobId={job}", f"QOS={qos}"))
