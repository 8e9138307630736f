"""Who holds each GPU on a Slurm node: the jobs running there and the GPU indices each was
given, from `scontrol show job --details --oneliner` (one call a poll of the source, answered by
slurmctld). A GPU held by a job is allocated to it; the owner is the job's account, user and job
id (the partition is read too, for the log).

Slurm numbers a node's GPUs by their order in gres.conf (with AutoDetect=nvml, by the NVML
order the collector reads too): the job's `GRES=gpu:h100:2(IDX:0-1)` names GPUs 0 and 1, and
every device the collector reads at those indices (a MIG instance carries its GPU's index) is
held by that job.
"""

import re
import subprocess
from dataclasses import dataclass

from agent.holders import HolderError, held_by, marked_unknown
from agent.readings import Reading

# States in which a job still holds its GRES (a suspended job keeps its GPUs unless the
# cluster is set to release them; a completing one until its epilog ends).
HOLDING = {"RUNNING", "SUSPENDED", "COMPLETING"}
JOB = re.compile(r"(?:^|\s)JobId=(\d+)\s")
FIELDS = {name: re.compile(rf"\s{name}=([^\s(]+)") for name in
          ("UserId", "Account", "JobState", "Partition")}
# The --details part: one per group of the job's nodes, with the GRES each got there.
DETAIL = re.compile(r"\sNodes=(\S+) CPU_IDs=\S* Mem=\S* GRES=(\S*)")
GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:\d+\(IDX:([0-9,-]+)\)")
TIMEOUT_S = 5.0  # a controller that is down keeps scontrol retrying for about 9 s


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
    """The jobs of `scontrol show job --details --oneliner` that hold GPUs on `node`."""
    out = []
    for line in text.splitlines():
        found = JOB.search(line)
        if not found:
            continue
        fields = {name: (m.group(1) if (m := pattern.search(line)) else "")
                  for name, pattern in FIELDS.items()}
        if fields["JobState"] not in HOLDING:
            continue
        gpus = sorted({index for nodes, gres in DETAIL.findall(line)
                       if node in expand_hostlist(nodes)
                       for idx in GPU_GRES.findall(gres) for index in indices(idx)})
        if gpus:
            out.append(Job(found.group(1), fields["Account"], fields["UserId"],
                           fields["Partition"], tuple(gpus)))
    return out


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

    def __init__(self, node: str, scontrol: str = "scontrol", env: dict | None = None):
        """`env`: the environment scontrol runs in (this process's when None; SLURM_CONF
        there names a configuration other than /etc/slurm/slurm.conf)."""
        self.node, self.scontrol, self.env = node, scontrol, env

    def read(self) -> SlurmHoldings:
        command = [self.scontrol, "show", "job", "--details", "--oneliner"]
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
