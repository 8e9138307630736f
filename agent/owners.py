"""Who runs a GPU process: the user (from /proc), and from its cgroup a Kubernetes pod UID or a
Slurm job id where present. Needs the host's PID namespace to see containers' processes."""

import pwd
import re
from pathlib import Path

POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
SLURM_JOB = re.compile(r"job_(\d+)")


def owner_of(pid: int, proc: Path = Path("/proc")) -> dict[str, str] | None:
    """The owner of a process, or None when it has gone or cannot be read."""
    base = proc / str(pid)
    owner: dict[str, str] = {}
    try:
        status = (base / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            uid = int(line.split()[1])
            try:
                owner["user"] = pwd.getpwuid(uid).pw_name
            except KeyError:
                owner["user"] = str(uid)
            break
    try:
        cgroup = (base / "cgroup").read_text()
    except OSError:
        cgroup = ""
    if match := POD.search(cgroup):
        owner["pod"] = match.group(1).replace("_", "-")
    if match := SLURM_JOB.search(cgroup):
        owner["job"] = match.group(1)
    return owner or None
