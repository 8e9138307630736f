"""A batch's valid samples as columns, and the helpers that work on columns: the container the
wire reader and the plain parser fill (metering.intake.wire, metering.intake.protocol) and
the stores write (metering.intake.store), and calling a function once per distinct value of
a column (timestamps, owners) however often a batch repeats it."""

from dataclasses import dataclass
from operator import itemgetter

FIELDS = ("index", "gpu_uuid", "ts", "interval_s", "allocated", "fraction", "util_pct",
          "mem_used_mib", "mem_total_mib", "power_w", "temp_c", "gpu_index", "model", "owner",
          "holder_unknown", "parent_uuid")


@dataclass(slots=True)
class Columns:
    """A batch's valid samples as columns, one list or tuple per field (in FIELDS order)."""

    index: list
    gpu_uuid: list
    ts: list
    interval_s: list
    allocated: list
    fraction: list
    util_pct: list
    mem_used_mib: list
    mem_total_mib: list
    power_w: list
    temp_c: list
    gpu_index: list
    model: list
    owner: list
    holder_unknown: list
    parent_uuid: list

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def of(cls, valid: list) -> "Columns":
        """The columns of samples (metering.intake.protocol.Sample), in their order."""
        return cls(*([getattr(s, name) for s in valid] for name in FIELDS))

    def keep(self, positions: list[int]) -> "Columns":
        return Columns(*taken([getattr(self, name) for name in FIELDS], positions))


class _Once(dict):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def __missing__(self, value):
        result = self[value] = self.function(value)
        return result


def each_once(function, values) -> list:
    """[function(value) for value in values], calling it once per distinct value: a batch
    repeats few timestamps and owners, and equal values share one result. The values must be
    hashable; an exception from `function` propagates."""
    return list(map(_Once(function).__getitem__, values))


def each_object_once(function, values) -> list:
    """each_once for values that cannot be hashed (owner dicts), calling `function` once per
    distinct object: the fast path gives equal owners one shared dict."""
    keys = list(map(id, values))
    results = {key: function(value) for key, value in dict(zip(keys, values, strict=True)).items()}
    return list(map(results.__getitem__, keys))


def taken(columns: list, positions: list[int]) -> list[tuple]:
    """The columns holding only the samples at `positions`, in that order."""
    if len(positions) == 1:  # itemgetter of one position gives the value, not a tuple
        return [(column[positions[0]],) for column in columns]
    if not positions:
        return [() for _column in columns]
    take = itemgetter(*positions)
    return [take(column) for column in columns]
