"""What every holder source answers to, and the two ways a source lays out a reading: held by
its owner, or marked holder_unknown (agent.holders: one module a scheduler, found by name)."""

import dataclasses
from typing import Protocol

from agent.readings import Reading

SOURCES = ("processes", "kubelet", "slurm")
KUBELET_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"


class HolderError(Exception):
    """The scheduler could not be asked (socket missing, controller down, unreadable answer)."""


class Holdings(Protocol):
    """One answer of a scheduler: who holds what at that moment."""

    def apply(self, readings: list[Reading]) -> list[Reading]:
        """The readings with allocation and owner as the scheduler says."""

    def unknown(self, readings: list[Reading]) -> list[Reading]:
        """The readings laid out as this answer knew the devices, marked holder_unknown."""


class Source(Protocol):
    name: str
    least_every: float  # the least seconds between two questions (0: ask at every poll)

    def read(self) -> Holdings:
        """The scheduler's answer now, or HolderError."""


def held_by(reading: Reading, owner: dict[str, str] | None, **changes) -> Reading:
    """A reading as a scheduler source sees it: allocated exactly when held (the processes
    say nothing about it any more), owned by its holder."""
    return dataclasses.replace(reading, processes=(), owner=owner, holder_unknown=False,
                               **changes)


def marked_unknown(reading: Reading, **changes) -> Reading:
    return dataclasses.replace(reading, processes=(), owner=None, holder_unknown=True, **changes)
