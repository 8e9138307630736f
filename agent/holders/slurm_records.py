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
And a record whose epilog never ran ends when squeue no longer lists its job: unended records
are checked against `squeue --json` at most once an hour (CHECK_EVERY_S), where squeue can be
asked; a job gone from it ends at the check that found it gone.

The records are trusted only as root wrote them (DESIGN.md, "Trust"): the folder must be a
real folder (no symbolic link) that root owns and no one else may write, else no record is
read and the agent says why (its samples are marked holder unknown); a record must be a
regular file root owns, never a link; and its GPUs are indices a node can have.
"""

import errno
import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.holders.protocol import HolderError
from agent.holders.slurm import Job, SlurmHoldings, SlurmSource, indices, moment

log = logging.getLogger("gpuloans-agent")

FOLDER = "/run/gpuloans/slurm-jobs"
NAME = re.compile(r"(\d{1,20})(\.ended)?")
GPUS = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
WORD = re.compile(r"[^\s=]{1,128}")  # an account or user name as Slurm allows them
MOST_RECORDS = 10_000
MOST_BYTES = 4096
ROOT = 0
CHECK_EVERY_S = 3600.0  # the least time between two checks of unended records with squeue
YOUNG = timedelta(minutes=5)  # a record this young is not checked: squeue may lag the prolog


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
    try:
        held = tuple(indices(gpus))
    except HolderError:  # an index no node has
        return None
    return Record(Job(job, fields["account"], fields["user"], "", held, start), ended)


class SlurmRecordsSource:
    name = "slurm (prolog records)"
    least_every = 0.0  # local files: read at every poll

    def __init__(self, folder: str | Path = FOLDER, *, squeue: SlurmSource | None = None,
                 owner: int = ROOT):
        """`squeue`: where unended records are checked (None: never); `owner`: the user the
        folder and records must belong to (root; tests name their own)."""
        self.folder, self.squeue, self.owner = Path(folder), squeue, owner
        self.said: set[str] = set()  # what was said once: bad records, GPUs named twice
        self.gone: dict[str, datetime] = {}  # job -> when squeue was found not to list it
        self.checked = -CHECK_EVERY_S  # time.monotonic() of the last check

    def read(self) -> SlurmHoldings:
        records = self._ended_where_gone(self._records())
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

    def _ended_where_gone(self, records: list[Record]) -> list[Record]:
        """Unended records of jobs squeue no longer lists end when that was found (checked at
        most every CHECK_EVERY_S; a failing squeue is said once and changes nothing)."""
        now = datetime.now(UTC)
        unended = [r for r in records if r.end is None and r.job.job not in self.gone
                   and now - r.job.start >= YOUNG]
        if (self.squeue is not None and unended
                and time.monotonic() - self.checked >= CHECK_EVERY_S):
            self.checked = time.monotonic()
            try:
                listed = self.squeue.listed()
            except HolderError as error:
                self._once("squeue", "cannot check unended job records with squeue: %s", error)
            else:
                for record in unended:
                    if record.job.job not in listed:
                        self.gone[record.job.job] = now
                        log.warning("job %s has a record and no end, and squeue no longer "
                                    "lists it (did its epilog run?): it holds GPU %s no more",
                                    record.job.job, ",".join(map(str, record.job.gpus)))
        names = {r.job.job for r in records}
        self.gone = {job: at for job, at in self.gone.items() if job in names}
        return [Record(r.job, self.gone[r.job.job]) if r.end is None and r.job.job in self.gone
                else r for r in records]

    def _trusted_folder(self) -> None:
        """HolderError unless the folder is a real folder the owner holds and no one else may
        write: else anyone able to write there could give GPUs to any account."""
        try:
            info = os.lstat(self.folder)
        except OSError as error:
            raise HolderError(f"cannot read the Slurm job records in {self.folder}: "
                              f"{error.strerror} (is deploy/slurm's prolog installed?)") from None
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise HolderError(f"{self.folder} is not a folder but a link or a file: no job "
                              "record is read (install deploy/slurm's tmpfiles entry)")
        if info.st_uid != self.owner:
            raise HolderError(f"{self.folder} belongs to uid {info.st_uid}, not {self.owner}: "
                              "no job record is read")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise HolderError(f"{self.folder} may be written by others than its owner (mode "
                              f"{stat.S_IMODE(info.st_mode):04o}): no job record is read; "
                              "make it 0755")

    def _read_record(self, path: str) -> str | None:
        """The record's text, or None where it is gone or is no regular file the owner wrote
        (said once)."""
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None  # ended (renamed) or pruned between the listing and the read
        except OSError as error:
            if error.errno == errno.ELOOP:
                self._once(path, "%s is a symbolic link, not a job record; left out", path)
                return None
            raise HolderError(f"cannot read {path}: {error.strerror}") from None
        try:
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != self.owner:
                self._once(path, "%s is not a file its folder's owner wrote; left out", path)
                return None
            return os.read(handle, MOST_BYTES).decode("utf-8", errors="replace")
        finally:
            os.close(handle)

    def _records(self) -> list[Record]:
        self._trusted_folder()
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
            text = self._read_record(entry.path)
            if text is None:
                continue
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
