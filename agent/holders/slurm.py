"""Who holds each GPU on a Slurm node: the jobs running there and the GPU indices each was
given, from `squeue --json` (one call a poll of the source, answered by slurmctld: it lists
every job of the cluster, and the source keeps this node's). A GPU held by a job is allocated
to it; the owner is the job's account, user and job id (the partition is read too, for the
log).

Only Slurm's machine format is read, never text a cluster user controls: `scontrol`'s text
prints the job name raw among the fields, so a job named "x Account=other JobState=RUNNING
GRES=gpu:h100:4(IDX:0-3)" could claim another account's GPUs there. In the JSON the name is
one field among others, and this source never reads it.

Slurm numbers a node's GPUs by their order in gres.conf (with AutoDetect=nvml, by the NVML
order the collector reads too): a job's `gres_detail` entry `gpu:h100:2(IDX:0-1)` for a node
names GPUs 0 and 1, and every device the collector reads at those indices (a MIG instance
carries its GPU's index) is held by that job.
"""

import json
import re
import subprocess
from dataclasses import dataclass

from agent.holders import HolderError, held_by, marked_unknown
from agent.readings import Reading

# States in which a job still holds its GRES (a suspended job keeps its GPUs unless the
# cluster is set to release them; a completing one until its epilog ends).
HOLDING = {"RUNNING", "SUSPENDED", "COMPLETING"}
GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:\d+\(IDX:([0-9,-]+)\)")
TIMEOUT_S = 5.0  # a controller that is down keeps squeue retrying for about 9 s


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


def indices(idx: str) -> list[int]:
    """An IDX list ("0-1,3") as GPU indices."""
    return [int(n) for n in _numbers(idx)]


@dataclass(frozen=True)
class Job:
    job: str
    account: str
    user: str
    partition: str
    gpus: tuple[int, ...]  # on this node

    @property
    def owner(self) -> dict[str, str]:
        return {"account": self.account, "user": self.user, "job": self.job}


def jobs_on(text: str, node: str) -> list[Job]:
    """The jobs of `squeue --json` that hold GPUs on `node`. Slurm 22.05 states a job's
    state as a string, later versions as a list of flags; both are read. Each `gres_detail`
    entry is the GRES of one of the job's nodes, in the order of its allocated nodes."""
    try:
        jobs = json.loads(text).get("jobs", [])
    except (ValueError, AttributeError):
        raise HolderError("squeue --json printed no JSON object") from None
    out = []
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict) or not _holding(job.get("job_state")):
            continue
        details = job.get("gres_detail") or []
        nodes = _nodes(job)
        gpus = sorted({index for name, gres in zip(nodes, details, strict=False)
                       if name == node and isinstance(gres, str)
                       for idx in GPU_GRES.findall(gres) for index in indices(idx)})
        if gpus:
            out.append(Job(str(job.get("job_id", "")), str(job.get("account") or ""),
                           str(job.get("user_name") or ""), str(job.get("partition") or ""),
                           tuple(gpus)))
    return out


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


@dataclass(frozen=True)
class SlurmHoldings:
    owners: dict[int, dict[str, str]]  # GPU index -> the job holding it

    def apply(self, readings: list[Reading]) -> list[Reading]:
        return [held_by(r, self.owners.get(r.index) if r.index is not None else None)
                for r in readings]

    def unknown(self, readings: list[Reading]) -> list[Reading]:
        return [marked_unknown(r) for r in readings]


class SlurmSource:
    name = "slurm"

    def __init__(self, node: str, squeue: str = "squeue", env: dict | None = None):
        """`env`: the environment squeue runs in (this process's when None; SLURM_CONF
        there names a configuration other than /etc/slurm/slurm.conf)."""
        self.node, self.squeue, self.env = node, squeue, env

    def read(self) -> SlurmHoldings:
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
        owners = {}
        for job in jobs_on(done.stdout, self.node):
            owners.update(dict.fromkeys(job.gpus, job.owner))
        return SlurmHoldings(owners)
