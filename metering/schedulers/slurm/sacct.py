"""Slurm's accounting as `sacct` gives it: the one reader of its formats in the project.
`sacct --json` where Slurm has it (21.08 and later), else `sacct -P` with the columns JobID,
Account, User, Start, End, AllocTRES, State, Submit, Eligible, Reason, QOS and ReqTRES; times
asked for in UTC. A job's GPUs are read from its AllocTRES (gres/gpu, or the sum of its typed
counts), and a job's GPU-seconds are spread over the UTC hours it ran (spread_seconds). The
same answer gives every job that asked for GPUs and waited, with its submission, eligibility,
start, end, last pending reason and QOS (`Waited`): the floor's waits (docs/guarantee.md).
Pure: text in, jobs and hours out. The importer (metering.schedulers.slurm.accounting) and the
advice's history reader (loans.services.advice.history) both read through here."""

import json
import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)
FIELDS = ("JobID", "Account", "User", "Start", "End", "AllocTRES", "State", "Submit",
          "Eligible", "Reason", "QOS", "ReqTRES")
HELD_FIELDS = 7  # an answer of the first seven columns alone is read as jobs that held GPUs
TIMEOUT_S = 300


class AccountingError(Exception):
    """sacct could not be run or its answer not read."""


@dataclass(frozen=True)
class Job:
    job: str
    account: str
    user: str
    gpus: int
    start: datetime
    end: datetime | None  # None while it runs
    state: str


# Slurm's pending reasons that mean "no room now". Anything else named (a constraint it can
# never meet, a limit of its own account or QOS, gpuloans' GPU-minute budgets, a hold) is not a
# wait on the floor. Accounting rarely knows why a job waited: slurmdbd keeps the reason a job
# had when it was last sent there, and on Slurm 22.05 a job that pends, starts or is cancelled
# reads "None" (squeue said Resources meanwhile). So a job whose accounting names no reason
# counts as waiting for room when it waited long enough past its Eligible (dependencies and
# begin times are before it) not to be the scheduler's own cycle (`capacity`'s grace).
CAPACITY_REASONS = frozenset({"Resources", "Priority"})
NO_REASON = frozenset({"None", ""})


@dataclass(frozen=True)
class Waited:
    """A job that asked for GPUs and did not start at once: what the floor's measure reads
    (loans.maths.guarantee.Request)."""

    job: str
    account: str
    user: str
    gpus: int  # asked for (ReqTRES, else AllocTRES)
    gpu_type: str  # the typed count's name (gres/gpu:h100), "" where untyped
    submit: datetime
    eligible: datetime | None
    start: datetime | None  # None: never started (cancelled while waiting, or waits still)
    end: datetime | None
    state: str
    reason: str  # the last reason it was kept from running
    qos: str

    def capacity(self, grace: timedelta, now: datetime) -> bool:
        """Whether it waited for room: a reason of CAPACITY_REASONS; or, where accounting
        names none, a wait past its Eligible of `grace` at least (until its start, its end, or
        `now` while it waits)."""
        if self.reason in CAPACITY_REASONS:
            return True
        until = self.start or self.end or now
        return (self.reason in NO_REASON
                and until - (self.eligible or self.submit) >= grace)


@dataclass(frozen=True)
class Read:
    jobs: list[Job]  # that held GPUs
    waited: list[Waited]


MAX_GPU_DIGITS = 7  # no job holds ten million GPUs


def gpu_count(tres: str) -> int | None:
    """The GPUs of a TRES list (a job's AllocTRES, "cpu=1,gres/gpu=2,node=1", or an account's
    GrpTRES limit): gres/gpu, or the sum of its typed counts (gres/gpu:h100=2) where the total
    is not listed; None where it names no GPUs. A count that is not a whole number of at most
    seven ASCII digits raises ValueError carrying it."""
    counts = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
    wanted = ([counts["gres/gpu"]] if "gres/gpu" in counts
              else [n for key, n in counts.items() if key.startswith("gres/gpu:")])
    if not wanted:
        return None
    for count in wanted:
        if not (count.isascii() and count.isdigit() and len(count) <= MAX_GPU_DIGITS):
            raise ValueError(count)
    return sum(int(count) for count in wanted)


def gpu_type_of(tres: str) -> str:
    """The GPU type a TRES list names (gres/gpu:h100=1), "" where untyped or of several."""
    types = {key.split(":", 1)[1] for key in (item.split("=", 1)[0] for item in tres.split(","))
             if key.startswith("gres/gpu:")}
    return types.pop() if len(types) == 1 else ""


def gpus_of(tres: str) -> int:
    """A job's GPUs from its AllocTRES: gpu_count, 0 where it names none."""
    return gpu_count(tres) or 0


def _moment(text: str) -> datetime | None:
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC)  # asked for in UTC (TZ=UTC)


def read_parsable(text: str) -> list[Job]:
    """Jobs of `sacct -X -P -n -o JobID,Account,User,Start,End,AllocTRES,State[,...]` that held
    GPUs and started."""
    return read_parsable_all(text).jobs


def _waited(job: str, account: str, user: str, tres: str, submit: datetime | None,
            eligible: datetime | None, start: datetime | None, end: datetime | None,
            state: str, reason: str, qos: str) -> Waited | None:
    """The job as the floor reads it, where it asked for GPUs and did not start at once."""
    try:
        gpus = gpu_count(tres) or 0
    except ValueError:
        return None
    if gpus <= 0 or submit is None or (start is not None and start <= (eligible or submit)):
        return None
    return Waited(job, account, user, gpus, gpu_type_of(tres), submit, eligible, start, end,
                  state, reason, qos)


def read_parsable_all(text: str) -> Read:
    """The jobs that held GPUs and the jobs that waited for them, from one `sacct -P`."""
    jobs, waited = [], []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) not in (HELD_FIELDS, len(FIELDS)):
            continue
        job, account, user, start, end, tres, state = fields[:HELD_FIELDS]
        state = state.split()[0] if state else ""
        begun = _moment(start)
        if len(fields) == len(FIELDS):
            submit, eligible, reason, qos, asked = fields[HELD_FIELDS:]
            try:
                wait = _waited(job, account, user, asked or tres, _moment(submit),
                               _moment(eligible), begun, _moment(end), state, reason, qos)
            except ValueError:  # a time that is not one
                wait = None
            if wait is not None:
                waited.append(wait)
        try:
            gpus = gpus_of(tres)
        except ValueError:
            continue  # not a count of GPUs: not a job that held any
        if begun is None or gpus <= 0:
            continue
        jobs.append(Job(job, account, user, gpus, begun, _moment(end), state))
    return Read(jobs, waited)


def read_json(text: str) -> list[Job]:
    """Jobs of `sacct -X --json` (its OpenAPI shapes as of v0.0.38) that held GPUs and
    started."""
    return read_json_all(text).jobs


def _tres_text(items: list) -> str:
    """A JSON TRES list written as sacct's columns write it (gres/gpu:h100=1)."""
    return ",".join(f"{t.get('type')}/{t.get('name')}={t.get('count') or 0}"
                    if t.get("name") else f"{t.get('type')}={t.get('count') or 0}"
                    for t in items)


def _stamp(value) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int) and value > 0 else None


def read_json_all(text: str) -> Read:
    """The jobs that held GPUs and the jobs that waited for them, from one `sacct --json`."""
    jobs, waited = [], []
    for raw in json.loads(text).get("jobs", []):
        times = raw.get("time", {})
        start, end = times.get("start") or 0, times.get("end") or 0
        tres = raw.get("tres") or {}
        allocated = tres.get("allocated") or []
        gpu = [t.get("count") or 0 for t in allocated
               if t.get("type") == "gres" and t.get("name") == "gpu"]
        gpus = gpu[0] if gpu else sum(
            t.get("count") or 0 for t in allocated
            if t.get("type") == "gres" and str(t.get("name") or "").startswith("gpu:"))
        state = raw.get("state", "")
        current = state.get("current", "") if isinstance(state, dict) else str(state)
        array = raw.get("array") or {}
        job = (f"{array['job_id']}_{array['task_id']}"
               if array.get("job_id") and array.get("task_id") is not None
               else str(raw["job_id"]))
        account, user = raw.get("account") or "", raw.get("user") or ""
        wait = _waited(job, account, user,
                       _tres_text(tres.get("requested") or allocated),
                       _stamp(times.get("submission")), _stamp(times.get("eligible")),
                       _stamp(start), _stamp(end), current,
                       str(state.get("reason") or "") if isinstance(state, dict) else "",
                       str(raw.get("qos") or ""))
        if wait is not None:
            waited.append(wait)
        if not start or gpus <= 0:
            continue
        jobs.append(Job(job, account, user, int(gpus), datetime.fromtimestamp(start, UTC),
                        datetime.fromtimestamp(end, UTC) if end else None, current))
    return Read(jobs, waited)


Run = Callable[[list[str]], subprocess.CompletedProcess]


def run_sacct(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,  # noqa: S603
                          env={**os.environ, "TZ": "UTC"})


def sacct(since: datetime, until: datetime, run: Run = run_sacct) -> list[Job]:
    """Every job's allocation that ran in [since, until), from `sacct`."""
    return sacct_all(since, until, run).jobs


def sacct_all(since: datetime, until: datetime, run: Run = run_sacct) -> Read:
    """Every job's allocation that ran in [since, until), and every job that waited for GPUs
    in it, from one `sacct`."""
    # sacct takes whole seconds: the end rounded up, or a job submitted in the window's last
    # second (one the pass should see pending) falls outside it.
    end = until.astimezone(UTC)
    end = end.replace(microsecond=0) + timedelta(seconds=1) if end.microsecond else end
    window = ["-X", "-a", "-S", f"{since.astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
              "-E", f"{end:%Y-%m-%dT%H:%M:%S}"]
    try:
        done = run(["sacct", *window, "--json"])
        if done.returncode == 0:
            try:
                return read_json_all(done.stdout)
            except (ValueError, KeyError, TypeError, AttributeError):
                pass  # not the JSON this reads: the plain columns say the same
        done = run(["sacct", *window, "-P", "-n", "-o", ",".join(FIELDS)])
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AccountingError(f"sacct: {error}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise AccountingError(f"sacct failed: {said[-1] if said else done.returncode}")
    return read_parsable_all(done.stdout)


Span = tuple[datetime, datetime, int]  # a job's start, end and GPUs


def spread_seconds(first: datetime, count: int, spans: Iterable[Span]) -> list[float]:
    """GPU-seconds held in each of `count` UTC hours from `first` (an hour's start) by jobs
    (start, end, GPUs) within them: each job's GPUs over the part of each hour it ran. A job's
    partial first and last hours are added directly and its whole hours in between as a step
    up and a step down, summed once at the end, so a job costs the same however long it ran."""
    seconds = [0.0] * count
    steps = [0] * (count + 1)  # whole hours: GPUs from this hour on, as running sums
    for began, ended, gpus in spans:
        if ended <= began:
            continue
        k = int((began - first) / HOUR)
        boundary = first + HOUR * (k + 1)
        if ended <= boundary:  # within one hour
            seconds[k] += gpus * (ended - began).total_seconds()
            continue
        seconds[k] += gpus * (boundary - began).total_seconds()
        last = int((ended - first) / HOUR)  # the hour it ends in
        steps[k + 1] += gpus
        steps[last] -= gpus
        rest = (ended - (first + HOUR * last)).total_seconds()
        if rest:
            seconds[last] += gpus * rest
    running = 0
    for k in range(count):
        running += steps[k]
        seconds[k] += running * HOUR.total_seconds()
    return seconds
