"""What a collector reads from one GPU at one poll. Plain values; no Django here."""

from dataclasses import dataclass, field
from datetime import datetime


class CollectorError(Exception):
    """A collector could not read the GPUs at all (tool missing, endpoint down)."""


@dataclass(frozen=True)
class Process:
    pid: int
    used_mib: int | None = None
    owner: dict[str, str] | None = None


@dataclass(frozen=True)
class Reading:
    """One GPU (or MIG instance) at one poll. `error` is set, and the numbers left empty, for a
    device that could not be read while its neighbours could."""

    uuid: str
    index: int | None = None
    model: str | None = None
    util_pct: float | None = None
    mem_used_mib: int | None = None
    mem_total_mib: int | None = None
    power_w: float | None = None
    temp_c: int | None = None
    fraction: float = 1.0
    # The physical GPU a MIG instance or replica is part of (its uuid); None for a whole GPU.
    parent: str | None = None
    processes: tuple[Process, ...] = field(default_factory=tuple)
    owner: dict[str, str] | None = None  # when the source names it (dcgm-exporter pod labels)
    error: str | None = None
    # A scheduler was asked who holds the device and could not answer: allocated and owner
    # are unknown, not "free" (agent.holders).
    holder_unknown: bool = False
    # When the scheduler knows it: the moment (UTC) the device's present holder began to hold
    # it, or, for a free device, the moment its last holder let it go. The aggregator splits an
    # interval there rather than between two polls (agent.aggregate).
    since: datetime | None = None

    @property
    def allocated(self) -> bool:
        return bool(self.processes) or self.owner is not None
