"""Who holds each GPU, asked of the scheduler instead of read off the running processes.

Commitments are billed on what a team holds: a pod or a Slurm job that holds 8 GPUs and runs on
one holds 8. With a scheduler source the collector still reads utilisation, memory and power;
the source only says which devices are held and by whom, and a held device is allocated whether
or not a process runs on it:

- `kubelet` (agent.holders.kubelet): the kubelet's pod-resources API on the node's socket; the
  owner is the pod's namespace, pod and container. Time-sliced replicas (`<uuid>::<n>`) become
  devices of their own, each 1/replicas of its GPU.
- `slurm`: the jobs holding GPUs on this node and the GPU indices each holds; the owner is the
  job's account, user and job id. From the records the node's prolog and epilog write
  (agent.holders.slurm_records, read at every poll, no question to slurmctld), or, without
  them, `squeue --json` (agent.holders.slurm, asked at most once a minute).

A source that cannot be read (socket gone, slurmctld down) is said once, and the polls go on:
each device's reading is marked holder_unknown, never filled in from the processes, so the
server counts that time as a gap in its completeness rather than as idle GPUs.
"""

import logging
import time
from collections.abc import Callable

from agent.holders.protocol import (
    KUBELET_SOCKET,
    SOURCES,
    HolderError,
    Holdings,
    Source,
    held_by,
    marked_unknown,
)
from agent.readings import Reading

__all__ = ["KUBELET_SOCKET", "SOURCES", "HolderError", "Holders", "Holdings", "Source",
           "held_by", "marked_unknown", "source_for"]

log = logging.getLogger("gpuloans-agent")

class Holders:
    """A source asked at most every `every` seconds (a controller serves every node; the
    answer in between is the last one), its failures said once and its recovery said too."""

    def __init__(self, source: Source, every: float = 15.0,
                 clock: Callable[[], float] = time.monotonic):
        self.source, self.every, self.clock = source, every, clock
        self.last: Holdings | None = None
        self.asked_at: float | None = None
        self.failing: str | None = None

    def apply(self, readings: list[Reading]) -> list[Reading]:
        now = self.clock()
        if self.asked_at is None or now - self.asked_at >= self.every:
            self.asked_at = now
            self._ask()
        if self.failing is not None or self.last is None:
            layout = self.last
            return layout.unknown(readings) if layout else [marked_unknown(r) for r in readings]
        return self.last.apply(readings)

    def _ask(self) -> None:
        try:
            answer = self.source.read()
        except HolderError as error:
            if self.failing is None:
                log.error("cannot read who holds the GPUs from %s: %s; samples are sent "
                          "marked holder_unknown until it answers", self.source.name, error)
            self.failing = str(error)
            return
        if self.failing is not None:
            log.warning("%s answers again: who holds the GPUs is known", self.source.name)
        self.failing, self.last = None, answer


def source_for(name: str, *, node: str, kubelet_socket: str, slurm_node: str | None,
               resource_prefix: str, slurm_records: str | None = None) -> Source | None:
    """The named source (None for `processes`, the collector's own view). For Slurm: the
    prolog's records in `slurm_records` where it is given, else `squeue --json`."""
    if name == "kubelet":
        from agent.holders.kubelet import KubeletSource

        return KubeletSource(kubelet_socket, resource_prefix=resource_prefix)
    if name == "slurm" and slurm_records:
        from agent.holders.slurm import SlurmSource
        from agent.holders.slurm_records import SlurmRecordsSource

        return SlurmRecordsSource(slurm_records, squeue=SlurmSource(slurm_node or node))
    if name == "slurm":
        from agent.holders.slurm import SlurmSource

        return SlurmSource(slurm_node or node)
    return None
