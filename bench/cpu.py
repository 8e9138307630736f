"""Where a benchmark's CPU time went, from /proc: the machine as a whole, and by kind of
process (web workers, PostgreSQL, the benchmark's own client processes)."""

import os
from pathlib import Path

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")


def machine() -> tuple[int, int]:
    """The machine's busy and total CPU time so far, in clock ticks (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:9]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # less idle and iowait


def _fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (which may hold spaces), or None once gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def process_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """CPU seconds of a process, and of its children that it has waited for if asked."""
    fields = _fields(pid)
    if fields is None:
        return 0.0
    used = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped_children:
        used += int(fields[13]) + int(fields[14])  # cutime, cstime
    return used / TICKS


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _fields(int(entry.name))
            if fields is not None and int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


def postmaster(url: str) -> int | None:
    """The PostgreSQL server's main process, when it runs on this machine."""
    with psycopg.connect(url) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        fields = _fields(backend)
        if fields is None:
            return None  # another machine's (or another container's) process
        parent = int(fields[1])
    try:
        name = Path(f"/proc/{parent}/comm").read_text().strip()
    except FileNotFoundError:
        return None
    return parent if name.startswith("postgres") else None


class Split:
    """CPU seconds so far by kind: the web server's workers; PostgreSQL, its main process
    with every child, the exited ones included (when it runs here); and this process with
    the children it has waited for, which are the client processes of finished turns."""

    def __init__(self, web_server: int, database: int | None):
        self.web_server, self.database = web_server, database

    def read(self) -> dict[str, float]:
        seconds = {"web": sum(process_seconds(pid) for pid in _children(self.web_server)),
                   "PostgreSQL": 0.0,
                   "clients": process_seconds(os.getpid(), reaped_children=True)}
        if self.database is not None:
            seconds["PostgreSQL"] = process_seconds(self.database, reaped_children=True) + sum(
                process_seconds(pid) for pid in _children(self.database))
        return seconds
