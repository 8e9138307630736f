"""The Slurm source without slurmctld: the records the node's prolog and epilog write
(deploy/slurm/), one small file a job in one folder, read at every poll.

The prolog writes `<folder>/<job id>` as the job starts on this node, from what slurmd gives
it (never the job's name or anything else a user writes):

    job=<SLURM_JOB_ID>
    account=<SLURM_JOB_ACCOUNT>
    user=<SLURM_JOB_USER>
    gpus=<SLURM_JOB_GPUS: the node's GPU devices, Slurm's numbering>
    start=<epoch seconds>

and the epilog adds `end=<epoch seconds>` and renames it `<job id>.ended` (it deletes ended
records after an hour). A job holds its GPUs from its start to its end, to the second; the
ended records say when a free GPU was let go, so an interval is split where the job ended,
not between two polls.

Where two unended records name one GPU (a node daemon that died before an epilog could run),
the later start holds it: a GPU Slurm gave a new job was let go by the old one. Said once.
"""

import logging
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agent.holders.protocol import HolderError
from agent.holders.slurm import Job, SlurmHoldings, indices, moment

log = logging.getLogger("gpuloans-agent")

FOLDER = "/run/gpuloans/slurm-jobs"
NAME = re.compile(r"(\d{1,20})(\.ended)?")
GPUS = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
WORD = re.compile(r"[^\s=]{1,128}")  # an account or user name as Slurm allows them
MOST_RECORDS = 10_000
MOST_BYTES = 4096


@dataclass(frozen=True)
class Record:
    job: Job
    end: datetime | None


def parse(text: str, name: str) -> Record | None:
    """One record, or None where it is not one the prolog wrote (said by the caller)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in fields:
            fields[key] = value
    job, gpus = fields.get("job", ""), fields.get("gpus", "")
    start = moment(int(fields["start"])) if fields.get("start", "").isdigit() else None
    end = fields.get("end")
    ended = moment(int(end)) if end is not None and end.isdigit() else None
    if (job != name or not GPUS.fullmatch(gpus) or start is None
            or not WORD.fullmatch(fields.get("account", "")) or (end is not None and not ended)
            or not WORD.fullmatch(fields.get("user", ""))):
        return None
    return Record(Job(job, fields["account"], fields["user"], "", tuple(indices(gpus)), start),
                  ended)


class SlurmRecordsSource:
    name = "slurm (prolog records)"
    least_every = 0.0  # local files: read at every poll

    def __init__(self, folder: str | Path = FOLDER):
        self.folder = Path(folder)
        self.said: set[str] = set()  # what was said once: bad records, GPUs named twice

    def read(self) -> SlurmHoldings:
        records = self._records()
        held: dict[int, Job] = {}
        freed: dict[int, datetime] = {}
        for record in sorted(records, key=lambda r: (r.job.start, r.job.job)):
            for gpu in record.job.gpus:
                if record.end is not None:
                    freed[gpu] = max(freed.get(gpu, record.end), record.end)
                    continue
                if gpu in held:
                    self._once(f"gpu {gpu}: {held[gpu].job} {record.job.job}",
                               "GPU %d is recorded for jobs %s and %s, neither ended: job %s, "
                               "the later, holds it", gpu, held[gpu].job, record.job.job,
                               record.job.job)
                held[gpu] = record.job
        return SlurmHoldings(held, freed)

    def _records(self) -> list[Record]:
        try:
            entries = list(os.scandir(self.folder))
        except OSError as error:
            raise HolderError(f"cannot read the Slurm job records in {self.folder}: "
                              f"{error.strerror} (is deploy/slurm's prolog installed?)") from None
        if len(entries) > MOST_RECORDS:
            raise HolderError(f"{self.folder} holds {len(entries)} entries, more than "
                              f"{MOST_RECORDS}: is the epilog installed?")
        records = []
        for entry in entries:
            matched = NAME.fullmatch(entry.name)
            if matched is None:
                continue  # the prolog's file being written (.<job>.<pid>), or not ours
            try:
                with open(entry.path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(MOST_BYTES)
            except FileNotFoundError:
                continue  # ended (renamed) or pruned between the listing and the read
            except OSError as error:
                raise HolderError(f"cannot read {entry.path}: {error.strerror}") from None
            record = parse(text, matched.group(1))
            if record is None:
                self._once(entry.name, "%s is not a job record the prolog wrote; left out",
                           entry.path)
            else:
                records.append(record)
        return records

    def _once(self, key: str, message: str, *args) -> None:
        if key not in self.said:
            self.said.add(key)
            log.warning(message, *args)
