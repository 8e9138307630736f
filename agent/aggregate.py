"""Polls in, protocol-v1 samples out: one sample per GPU per interval, aligned to wall-clock
multiples of the interval. Mean utilisation and power, highest memory and temperature,
allocated if any poll saw a process (or, with a scheduler source, saw the device held), owner
of the process (or holder) seen in the most polls; marked holder_unknown when a scheduler
source could not be read at some poll of the interval."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agent.readings import Reading


def window_start(moment: datetime, interval_s: int) -> datetime:
    epoch = moment.astimezone(UTC).timestamp()
    return datetime.fromtimestamp(epoch - epoch % interval_s, UTC)


@dataclass
class _Gpu:
    last: Reading
    util: list[float] = field(default_factory=list)
    power: list[float] = field(default_factory=list)
    memory: int | None = None
    temp: int | None = None
    allocated: bool = False
    holder_unknown: bool = False
    owners: Counter = field(default_factory=Counter)

    def add(self, reading: Reading) -> None:
        self.last = reading
        if reading.util_pct is not None:
            self.util.append(reading.util_pct)
        if reading.power_w is not None:
            self.power.append(reading.power_w)
        if reading.mem_used_mib is not None:
            self.memory = max(self.memory or 0, reading.mem_used_mib)
        if reading.temp_c is not None:
            self.temp = reading.temp_c if self.temp is None else max(self.temp, reading.temp_c)
        self.allocated = self.allocated or reading.allocated
        self.holder_unknown = self.holder_unknown or reading.holder_unknown
        owners = [p.owner for p in reading.processes if p.owner] or (
            [reading.owner] if reading.owner else [])
        for owner in owners:
            self.owners[tuple(sorted(owner.items()))] += 1

    def sample(self, start: datetime, interval_s: int) -> dict:
        last = self.last
        owner = dict(self.owners.most_common(1)[0][0]) if self.owners else None
        sample = {
            "gpu_uuid": last.uuid, "gpu_index": last.index, "model": last.model,
            "mem_total_mib": last.mem_total_mib,
            "ts": start.isoformat().replace("+00:00", "Z"), "interval_s": interval_s,
            "allocated": self.allocated, "fraction": last.fraction,
            "util_pct": round(sum(self.util) / len(self.util), 3) if self.util else None,
            "mem_used_mib": self.memory,
            "power_w": round(sum(self.power) / len(self.power), 3) if self.power else None,
            "temp_c": self.temp, "owner": owner,
        }
        if self.holder_unknown:  # an optional field of protocol v1: only when it is true
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
        gpus = self._windows.setdefault(window_start(at, self.interval_s), {})
        for reading in readings:
            if reading.error is not None:
                continue
            if reading.uuid in gpus:
                gpus[reading.uuid].add(reading)
            else:
                gpu = gpus[reading.uuid] = _Gpu(last=reading)
                gpu.add(reading)

    def completed(self, now: datetime) -> list[dict]:
        """The samples of every interval that has ended by `now`, oldest first; they are
        handed over once."""
        ended = sorted(start for start in self._windows
                       if start + timedelta(seconds=self.interval_s) <= now)
        return [gpu.sample(start, self.interval_s)
                for start in ended for gpu in self._windows.pop(start).values()]
