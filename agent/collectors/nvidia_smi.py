"""The nvidia-smi collector: `--query-gpu` and `--query-compute-apps` in CSV, parsed by header.

Columns are found by name, not position, so any field list parses (the fixtures hold every
field nvidia-smi knows). Units in headers ("memory.used [MiB]") and values ("19818 MiB") are
dropped; "[N/A]", "[Not Supported]" and the like read as missing.
"""

import csv
import io
import subprocess
from collections.abc import Callable
from pathlib import Path

from agent.owners import owner_of
from agent.readings import CollectorError, Process, Reading

GPU_FIELDS = ("index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total",
              "power.draw", "temperature.gpu")
APP_FIELDS = ("gpu_uuid", "pid", "used_gpu_memory")
UNITS = (" MiB", " %", " W", " MHz", " C")


def value(text: str) -> str | None:
    """A field's value without its unit; None for nvidia-smi's bracketed 'no value' words."""
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    for unit in UNITS:
        if text.endswith(unit):
            return text[: -len(unit)].strip()
    return text


def _rows(text: str) -> list[dict[str, str | None]]:
    table = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    if not table:
        return []
    names = [column.split(" [")[0].strip() for column in table[0]]
    return [dict(zip(names, map(value, row), strict=False)) for row in table[1:] if row]


def _number(raw: str | None, kind: type):
    if raw is None:
        return None
    try:
        return kind(float(raw)) if kind is int else kind(raw)
    except ValueError:
        return None


def parse_gpus(text: str) -> list[Reading]:
    return [
        Reading(
            uuid=row["uuid"],
            index=_number(row.get("index"), int),
            model=row.get("name"),
            util_pct=_number(row.get("utilization.gpu"), float),
            mem_used_mib=_number(row.get("memory.used"), int),
            mem_total_mib=_number(row.get("memory.total"), int),
            power_w=_number(row.get("power.draw"), float),
            temp_c=_number(row.get("temperature.gpu"), int),
        )
        for row in _rows(text) if row.get("uuid")
    ]


def parse_apps(text: str) -> dict[str, list[Process]]:
    """Compute processes by GPU uuid."""
    apps: dict[str, list[Process]] = {}
    for row in _rows(text):
        pid = _number(row.get("pid"), int)
        if row.get("gpu_uuid") and pid is not None:
            apps.setdefault(row["gpu_uuid"], []).append(
                Process(pid=pid, used_mib=_number(row.get("used_gpu_memory"), int)))
    return apps


def combine(gpus: list[Reading], apps: dict[str, list[Process]]) -> list[Reading]:
    return [Reading(**{**vars(gpu), "processes": tuple(apps.get(gpu.uuid, ()))}) for gpu in gpus]


class NvidiaSmiCollector:
    def __init__(self, binary: str = "nvidia-smi", timeout: float = 10.0,
                 owners: Callable[[int], dict | None] | None = None):
        self.binary, self.timeout = binary, timeout
        self.owners = owners or (lambda pid: owner_of(pid, Path("/proc")))

    def _query(self, *args: str) -> str:
        try:
            done = subprocess.run([self.binary, *args, "--format=csv"], capture_output=True,  # noqa: S603
                                  text=True, timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise CollectorError(f"{self.binary}: {error}") from None
        if done.returncode != 0:
            raise CollectorError(f"{self.binary} exited {done.returncode}: "
                                 f"{(done.stderr or done.stdout).strip()[:200]}")
        return done.stdout

    def poll(self) -> list[Reading]:
        gpus = parse_gpus(self._query(f"--query-gpu={','.join(GPU_FIELDS)}"))
        apps = parse_apps(self._query(f"--query-compute-apps={','.join(APP_FIELDS)}"))
        owned = {uuid: [Process(p.pid, p.used_mib, self.owners(p.pid)) for p in processes]
                 for uuid, processes in apps.items()}
        return combine(gpus, owned)
