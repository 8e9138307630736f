"""The floor: whether a contract's base quota was there when its team asked for it
(docs/guarantee.md).

A job **waits on the floor** from when it became eligible until it started (or was cancelled, or
now while it still waits) when it asks for GPUs of the plan's model (`counts_for`), its last
pending reason says it waited for room (each scheduler's reader says which of its reasons do:
Slurm's Resources and Priority, Kueue's Pending, a pod's Unschedulable), and it is not in the
overage QOS (`wait_of`). At an instant, the **short GPUs** are
min(the GPUs of the jobs waiting on the floor, base quota - the GPUs the tenant held), never
below 0, and nothing in the intervals in which gpuloans itself held the contract (its own
overage hold, a spent budget). Short seconds are those with short GPUs above 0, short GPU-hours
their integral, and the availability 1 - short seconds / the seconds measured (`measure`).
A plan's credit tiers turn an availability below a level into a percent of the period's committed
cost (`credit_pct`).

Pure: times and counts in, figures out. GPU counts are held as billionths of a GPU so that the
fractions of MIG instances add up exactly, whatever the order.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

UNIT = 1_000_000_000  # a billionth of a GPU


@dataclass(frozen=True)
class Request:
    """A job as its scheduler recorded it."""

    job: str
    gpus: int
    submitted: datetime
    eligible: datetime | None  # None: never eligible (a dependency never met)
    started: datetime | None
    ended: datetime | None  # a job cancelled while waiting ended without starting
    capacity: bool  # whether its last pending reason was room
    qos: str = ""


@dataclass(frozen=True)
class Wait:
    job: str
    gpus: int
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Measure:
    seconds: float  # measured: the period so far
    short_seconds: float
    short_gpu_hours: float

    @property
    def availability(self) -> float:
        """1 - short seconds / seconds measured; 1 with nothing measured yet."""
        return 1 - self.short_seconds / self.seconds if self.seconds > 0 else 1.0


def wait_of(request: Request, *, now: datetime, overage_qos: str = "") -> Wait | None:
    """The interval `request` waited on the floor, or None where it never did (`overage_qos`:
    the start of the overage QOS's names; a job in one is past the commitment, not short of
    the floor)."""
    if request.gpus <= 0 or request.eligible is None:
        return None
    if not request.capacity or (overage_qos and request.qos.startswith(overage_qos)):
        return None
    begin = max(request.eligible, request.submitted)
    until = request.started or request.ended or now
    if until <= begin:
        return None
    return Wait(request.job, request.gpus, begin, until)


def counts_for(*, gpu_type: str, plan_model: str, type_models: dict[str, str],
               cluster_models: set[str]) -> bool:
    """Whether a request for `gpu_type` (the scheduler's name, "" untyped) asks for the plan's
    GPUs: any request where the plan names no model; a type the setting maps to the plan's
    model; a type that is the plan's model written as a node label (GPU feature discovery's
    nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB); an untyped request, or a type the setting
    does not name, where the cluster has one model and it is the plan's."""
    if not plan_model:
        return True
    if gpu_type and gpu_type in type_models:
        return type_models[gpu_type] == plan_model
    if gpu_type and _label(gpu_type) == _label(plan_model):
        return True
    return cluster_models == {plan_model}


def _label(name: str) -> str:
    return re.sub(r"[\s_-]+", "-", name.strip().lower())


Held = tuple[datetime, datetime, float]  # from, to, GPUs the tenant held (fractions of MIG)
Span = tuple[datetime, datetime]


def _units(gpus: float) -> int:
    return round(gpus * UNIT)


def measure(*, start: datetime, end: datetime, base_quota: int, waits: Iterable[Wait],
            held: Iterable[Held] = (), holds: Iterable[Span] = ()) -> Measure:
    """The floor over [start, end): `waits` on it, the tenant's holding `held`, and `holds`,
    the intervals in which gpuloans held the contract itself (they count nothing)."""
    if end <= start:
        return Measure(0.0, 0.0, 0.0)
    # Changes at each instant: (waiting, held, holds), in billionths of a GPU.
    steps: dict[datetime, list[int]] = {start: [0, 0, 0], end: [0, 0, 0]}

    def add(a: datetime, b: datetime, at: int, amount: int) -> None:
        a, b = max(a, start), min(b, end)
        if b <= a or amount == 0:
            return
        steps.setdefault(a, [0, 0, 0])[at] += amount
        steps.setdefault(b, [0, 0, 0])[at] -= amount

    for wait in waits:
        add(wait.start, wait.end, 0, wait.gpus * UNIT)
    for a, b, gpus in held:
        add(a, b, 1, _units(gpus))
    for a, b in holds:
        add(a, b, 2, 1)
    base = base_quota * UNIT
    waiting = holding = held_by_us = 0
    short_s = short_units_s = 0.0
    times = sorted(steps)
    for here, there in zip(times, times[1:], strict=False):
        change = steps[here]
        waiting, holding, held_by_us = (waiting + change[0], holding + change[1],
                                        held_by_us + change[2])
        short = min(waiting, base - holding) if held_by_us == 0 else 0
        if short > 0:
            seconds = (there - here).total_seconds()
            short_s += seconds
            short_units_s += short * seconds
    return Measure((end - start).total_seconds(), short_s, short_units_s / UNIT / 3600)


def held_at(moment: datetime, held: Iterable[Held]) -> float:
    """The GPUs the tenant held at `moment`."""
    return sum(_units(gpus) for a, b, gpus in held if a <= moment < b) / UNIT


def worst(waits: Iterable[Wait], count: int = 5) -> list[Wait]:
    """The longest waits in GPU-seconds, the evidence a lead reads."""
    return sorted(waits, key=lambda w: (-(w.end - w.start).total_seconds() * w.gpus,
                                        w.start, w.job))[:count]


Tier = tuple[Decimal, Decimal]  # (availability below this percent, credit this percent)


def credit_pct(availability: float, tiers: Iterable[Tier]) -> Decimal:
    """The percent of the period's committed cost credited at `availability` (0 to 1): the
    largest credit among the tiers whose level it is below; 0 where it is below none."""
    percent = Decimal(str(round(availability * 100, 6)))
    return max((credit for level, credit in tiers if percent < level), default=Decimal(0))


def tiers_text(tiers: Iterable[Tier]) -> str:
    """Tiers as parse_tiers reads them, highest level first: "95:10, 90:25"."""
    return ", ".join(f"{level.normalize():f}:{credit.normalize():f}" for level, credit in tiers)


class TierError(ValueError):
    """Tiers that cannot be read: `code` says why ("format", "range", "same", "order"),
    `part` where; the English message is for logs, the pages say it in the reader's
    language."""

    def __init__(self, code: str, part: str = ""):
        self.code, self.part = code, part
        super().__init__({
            "format": f"{part!r} is not a tier written level:credit, such as 95:10",
            "range": f"{part!r}: both percents must be above 0 and at most 100",
            "same": "two tiers have the same level",
            "order": "a lower availability cannot earn a smaller credit"}[code])


def parse_tiers(text: str) -> list[Tier]:
    """Tiers written "95:10, 90:25" (below 95%: 10%; below 90%: 25%), highest level first.
    Raises TierError."""
    tiers: list[Tier] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        level, sep, credit = part.partition(":")
        try:
            if not sep:
                raise ValueError
            tier = (Decimal(level.strip()), Decimal(credit.strip()))
        except (ArithmeticError, ValueError):
            raise TierError("format", part) from None
        if not all(x.is_finite() and 0 < x <= 100 for x in tier):
            raise TierError("range", part)
        tiers.append(tier)
    levels = [level for level, _credit in tiers]
    if len(set(levels)) != len(levels):
        raise TierError("same")
    ordered = sorted(tiers, reverse=True)
    if any(low[1] < high[1] for high, low in zip(ordered, ordered[1:], strict=False)):
        raise TierError("order")
    return ordered
