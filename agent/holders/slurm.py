"""Who holds each GPU on a Slurm node: the jobs holding an allocation there and the GPU
indices each was given. Two ways to learn them, both Slurm's machine formats, never text a
cluster user controls (`scontrol`'s text prints the job name raw among the fields, so a job
named "x Account=other JobState=RUNNING GRES=gpu:h100:4(IDX:0-3)" could claim another
account's GPUs there):

- the records the node's own prolog and epilog write (agent.holders.slurm_records, the scripts
  in deploy/slurm/): no question to slurmctld, read at every poll, each job's start and end to
  the second;
- `squeue --json` (this module), where the prolog is not installed: slurmctld answers it with
  every job of the cluster and the source keeps this node's, so the agent asks it at most once
  a minute. The job's name is one field among others there, and is never read.

Slurm numbers a node's GPUs by their order in gres.conf (with AutoDetect=nvml, NVML's order,
which the collector reads too): a job's `gres_detail` entry `gpu:h100:2(IDX:0-1)` names the
node's GPU devices 0 and 1. Where a GPU is split into MIG instances, each instance is a GPU
device of its own to Slurm, numbered GPU by GPU and, within one, in NVML's order of its
instances (`slurm_slots`): IDX:0 is then the first instance of GPU 0, never the whole GPU.
"""

import json
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime

from agent.holders.protocol import HolderError, held_by, marked_unknown
from agent.readings import Reading

# States in which a job still holds its GRES (a suspended job keeps its GPUs unless the
# cluster is set to release them; a completing one until its epilog ends).
HOLDING = {"RUNNING", "SUSPENDED", "COMPLETING"}
GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:\d+\(IDX:([0-9,-]+)\)")
TIMEOUT_S = 5.0  # a controller that is down keeps squeue retrying for about 9 s
SQUEUE_EVERY_S = 60.0  # the least time between two questions to slurmctld


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list ("gpu[01-03,07],login1") as names."""
    names, depth, start = [], 0, 0
    for k, char in enumerate(text + ","):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            if text[start:k]:
                names += _expand_one(text[start:k])
            start = k + 1
    return names


def _expand_one(item: str) -> list[str]:
    opened = item.find("[")
    if opened < 0:
        return [item]
    closed = item.index("]", opened)
    head, body, rest = item[:opened], item[opened + 1:closed], item[closed + 1:]
    return [head + middle + tail for middle in _numbers(body) for tail in _expand_one(rest)]


def _numbers(ranges: str) -> list[str]:
    out = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        width = len(low)
        out += [str(n).zfill(width) for n in range(int(low), int(high or low) + 1)]
    return out


MOST_GPU_INDEX = 1023  # no node has more GPUs: a larger index is no record of one


def indices(idx: str) -> list[int]:
    """An IDX list ("0-1,3") as GPU indices; HolderError for an index past MOST_GPU_INDEX,
    before any range is expanded (a record `gpus=0-20000000` cost 14 s)."""
    if any(int(n) > MOST_GPU_INDEX for n in re.findall(r"[0-9]+", idx)):
        raise HolderError(f"GPU index past {MOST_GPU_INDEX} in {idx[:40]!r}")
    return [int(n) for n in _numbers(idx)]


@dataclass(frozen=True)
class Job:
    job: str
    account: str
    user: str
    partition: str
    gpus: tuple[int, ...]  # on this node
    start: datetime | None = None

    @property
    def owner(self) -> dict[str, str]:
        return {"account": self.account, "user": self.user, "job": self.job}


def _jobs(text: str) -> list:
    try:
        jobs = json.loads(text).get("jobs", [])
    except (ValueError, AttributeError):
        raise HolderError("squeue --json printed no JSON object") from None
    return [job for job in jobs if isinstance(job, dict)] if isinstance(jobs, list) else []


def listed_jobs(text: str) -> set[str]:
    """The ids of the jobs `squeue --json` lists."""
    return {str(job.get("job_id", "")) for job in _jobs(text)}


def jobs_on(text: str, node: str) -> list[Job]:
    """The jobs of `squeue --json` that hold GPUs on `node`. Slurm 22.05 states a job's
    state as a string, later versions as a list of flags; both are read. Each `gres_detail`
    entry is the GRES of one of the job's nodes, in the order of its allocated nodes."""
    out = []
    for job in _jobs(text):
        if not _holding(job.get("job_state")):
            continue
        details = job.get("gres_detail") or []
        nodes = _nodes(job)
        try:
            gpus = sorted({index for name, gres in zip(nodes, details, strict=False)
                           if name == node and isinstance(gres, str)
                           for idx in GPU_GRES.findall(gres) for index in indices(idx)})
        except HolderError:
            continue  # no GPU of a real node
        if gpus:
            out.append(Job(str(job.get("job_id", "")), str(job.get("account") or ""),
                           str(job.get("user_name") or ""), str(job.get("partition") or ""),
                           tuple(gpus), moment(job.get("start_time"))))
    return out


def moment(seconds) -> datetime | None:
    """Slurm's epoch seconds (22.05 prints a number, later versions {"number": ...}) as a
    moment; None where it states none."""
    if isinstance(seconds, dict):
        seconds = seconds.get("number") if seconds.get("set", True) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _holding(state) -> bool:
    states = state if isinstance(state, list) else [state]
    return any(s in HOLDING for s in states if isinstance(s, str))


def _nodes(job: dict) -> list[str]:
    """The job's nodes in the order of its gres_detail: job_resources' allocated nodes where
    Slurm gives them, else its compressed host list expanded."""
    resources = job.get("job_resources")
    allocated = resources.get("allocated_nodes") if isinstance(resources, dict) else None
    if isinstance(allocated, list) and allocated:
        return [str(n.get("nodename", "")) if isinstance(n, dict) else "" for n in allocated]
    nodes = job.get("nodes")
    return expand_hostlist(nodes) if isinstance(nodes, str) else []


def slurm_slots(readings: list[Reading]) -> list[int | None]:
    """Each reading's number among the node's GPU devices as Slurm counts them: GPU by GPU in
    index order, a whole GPU one device, a GPU split into MIG instances one device an
    instance in the collector's (NVML's) order; None for a reading Slurm does not count (no
    index, or the whole of a GPU whose instances are read too)."""
    by_index: dict[int, list[int]] = {}
    for k, reading in enumerate(readings):
        if reading.index is not None:
            by_index.setdefault(reading.index, []).append(k)
    slots: list[int | None] = [None] * len(readings)
    slot = 0
    for index in sorted(by_index):
        members = by_index[index]
        parts = [k for k in members if readings[k].parent] or members[:1]
        for k in parts:
            slots[k], slot = slot, slot + 1
    return slots


@dataclass(frozen=True)
class SlurmHoldings:
    """One answer: the job holding each of the node's GPU devices (Slurm's numbering), with
    the moment it began; and for devices free now, when their last job let them go, where
    that is known."""

    held: dict[int, Job]
    freed: dict[int, datetime]

    def apply(self, readings: list[Reading]) -> list[Reading]:
        out = []
        for reading, slot in zip(readings, slurm_slots(readings), strict=True):
            job = self.held.get(slot) if slot is not None else None
            if job is not None:
                out.append(held_by(reading, job.owner, since=job.start))
            else:
                out.append(held_by(reading, None, since=self.freed.get(slot)))
        return out

    def unknown(self, readings: list[Reading]) -> list[Reading]:
        return [marked_unknown(r) for r in readings]


class SlurmSource:
    """`squeue --json`, asked by the agent at most every SQUEUE_EVERY_S."""

    name = "slurm (squeue --json)"
    least_every = SQUEUE_EVERY_S

    def __init__(self, node: str, squeue: str = "squeue", env: dict | None = None):
        """`env`: the environment squeue runs in (this process's when None; SLURM_CONF
        there names a configuration other than /etc/slurm/slurm.conf)."""
        self.node, self.squeue, self.env = node, squeue, env

    def read(self) -> SlurmHoldings:
        held = {}
        for job in jobs_on(self._ask(), self.node):
            held.update(dict.fromkeys(job.gpus, job))
        return SlurmHoldings(held, {})

    def listed(self) -> set[str]:
        """The ids of every job squeue lists, whatever its state or nodes."""
        return listed_jobs(self._ask())

    def _ask(self) -> str:
        command = [self.squeue, "--json"]
        try:
            done = subprocess.run(command, capture_output=True, text=True,  # noqa: S603
                                  timeout=TIMEOUT_S, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise HolderError(f"{' '.join(command)}: {error}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise HolderError(f"{' '.join(command)} failed: "
                              f"{said[-1] if said else f'exit {done.returncode}'}")
        return done.stdout
