"""Polls in, protocol-v1 samples out: one sample per GPU per interval, aligned to wall-clock
multiples of the interval, or one for each part of it a holder held when the holder changed
inside it. Mean utilisation and power, highest memory and temperature, allocated if any poll
saw a process (or, with a scheduler source, saw the device held), owner of the process (or
holder); marked holder_unknown when a scheduler source could not be read at some poll.

An interval in which the holder changed (one job ended and another began, a pod took the GPU)
is split where it changed: at the moment the scheduler gives (`Reading.since`: a Slurm job's
start from its prolog, its end from its epilog), else at the whole second midway between the
last poll that saw the old holder and the first that saw the new one. Each part is a sample of
its own, billed to its holder, so a job is billed the time it held the GPU to the second where
the scheduler says when, and to about half a poll where it does not; never a whole interval to
whoever held it in most polls. A change the scheduler dates inside an interval that ended
before the poll that saw it (a job began at :58, the next poll came at :02) still splits that
interval: intervals are handed over after the poll that follows them."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agent.readings import Reading


def window_start(moment: datetime, interval_s: int) -> datetime:
    epoch = moment.astimezone(UTC).timestamp()
    return datetime.fromtimestamp(epoch - epoch % interval_s, UTC)


def _owners(reading: Reading) -> list[tuple]:
    """The owners one poll saw, as hashable keys: its processes' owners, or the scheduler's
    holder."""
    owners = [p.owner for p in reading.processes if p.owner] or (
        [reading.owner] if reading.owner else [])
    return [tuple(sorted(owner.items())) for owner in owners]


def _holder(reading: Reading) -> tuple | None:
    """Who held the GPU at one poll: the owner of most of its processes (the first seen where
    they tie), or the scheduler's holder; None where nobody did."""
    owners = _owners(reading)
    return Counter(owners).most_common(1)[0][0] if owners else None


@dataclass
class _Gpu:
    polls: list[tuple[datetime, Reading]] = field(default_factory=list)

    def add(self, reading: Reading, at: datetime) -> None:
        self.polls.append((at, reading))

    def samples(self, start: datetime, interval_s: int) -> list[dict]:
        """The interval's samples: one, or one a holder where the holder changed."""
        runs: list[list[tuple[datetime, Reading]]] = []
        held = object()  # the holder of the run being built (no holder is None)
        for at, reading in self.polls:
            holder = _holder(reading)
            if runs and holder == held:
                runs[-1].append((at, reading))
            else:
                runs.append([(at, reading)])
                held = holder
        end = start + timedelta(seconds=interval_s)
        edges = [start]
        for before, after in zip(runs, runs[1:], strict=False):
            edge = _edge(before[-1][0], after[0][0], after[0][1].since, start)
            edges.append(min(max(edge, edges[-1] + timedelta(seconds=1)),
                             end - timedelta(seconds=1)))
        edges.append(end)
        parts: list[tuple[datetime, datetime, list[Reading]]] = []
        carried: list[Reading] = []  # polls of a part left no whole second: the next takes them
        for run, first, last in zip(runs, edges[:-1], edges[1:], strict=True):
            readings = carried + [reading for _at, reading in run]
            if last <= first:
                carried = readings
            else:
                parts.append((first, last, readings))
                carried = []
        if carried:
            first, last, readings = parts[-1]
            parts[-1] = (first, last, readings + carried)
        return [_sample(readings, first, int((last - first).total_seconds()))
                for first, last, readings in parts]


def _edge(last_old: datetime, first_new: datetime, since: datetime | None,
          start: datetime) -> datetime:
    """Where the holder changed between two polls: when the scheduler said (`since`, in
    whole seconds, so up to a second before the last poll of the old holder), else the whole
    second midway."""
    if since is not None and last_old - timedelta(seconds=1) < since <= first_new:
        moment = since
    else:
        moment = last_old + (first_new - last_old) / 2
    return start + timedelta(seconds=round((moment - start).total_seconds()))


def _sample(readings: list[Reading], start: datetime, interval_s: int) -> dict:
    last = readings[-1]
    util = [r.util_pct for r in readings if r.util_pct is not None]
    power = [r.power_w for r in readings if r.power_w is not None]
    memory = [r.mem_used_mib for r in readings if r.mem_used_mib is not None]
    temp = [r.temp_c for r in readings if r.temp_c is not None]
    owners = Counter(owner for reading in readings for owner in _owners(reading))
    sample = {
        "gpu_uuid": last.uuid, "gpu_index": last.index, "model": last.model,
        "mem_total_mib": last.mem_total_mib,
        "ts": start.isoformat().replace("+00:00", "Z"), "interval_s": interval_s,
        "allocated": any(r.allocated for r in readings), "fraction": last.fraction,
        "util_pct": round(sum(util) / len(util), 3) if util else None,
        "mem_used_mib": max(memory) if memory else None,
        "power_w": round(sum(power) / len(power), 3) if power else None,
        "temp_c": max(temp) if temp else None,
        "owner": dict(owners.most_common(1)[0][0]) if owners else None,
    }
    if any(r.holder_unknown for r in readings):  # optional in protocol v1: only when true
        sample["holder_unknown"] = True
    if last.parent:  # optional too: a MIG instance's or replica's physical GPU
        sample["parent_uuid"] = last.parent
    return sample


class Aggregator:
    def __init__(self, interval_s: int = 60):
        if not 1 <= interval_s <= 3600:
            raise ValueError("the interval must be 1 to 3600 seconds")
        self.interval_s = interval_s
        self._windows: dict[datetime, dict[str, _Gpu]] = {}

    def add(self, readings: list[Reading], at: datetime) -> None:
        """One poll. Readings with an error are left out: an interval is what was read."""
        start = window_start(at, self.interval_s)
        gpus = self._windows.setdefault(start, {})
        for reading in readings:
            if reading.error is not None:
                continue
            if reading.since is not None and reading.since < start:
                self._back_to(reading)
            gpus.setdefault(reading.uuid, _Gpu()).add(reading, at)

    def _back_to(self, reading: Reading) -> None:
        """A holder that changed in an interval not yet handed over (the poll after the
        change fell past its end): that interval gets the change at the moment the scheduler
        gave, as a poll of its own, so its last seconds go to the new holder."""
        earlier = self._windows.get(window_start(reading.since, self.interval_s))
        gpu = earlier.get(reading.uuid) if earlier is not None else None
        if not gpu or _holder(gpu.polls[-1][1]) == _holder(reading):
            return
        last = gpu.polls[-1][0]
        if last - timedelta(seconds=1) < reading.since:  # whole seconds: up to 1 s early
            gpu.add(reading, max(last, reading.since))

    def completed(self, now: datetime) -> list[dict]:
        """The samples of every interval that has ended by `now`, oldest first; they are
        handed over once."""
        ended = sorted(start for start in self._windows
                       if start + timedelta(seconds=self.interval_s) <= now)
        return [sample for start in ended for gpu in self._windows.pop(start).values()
                for sample in gpu.samples(start, self.interval_s)]
