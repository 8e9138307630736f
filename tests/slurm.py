"""A real Slurm for the tests: Debian's slurmctld and slurmd (and munge) on this machine, one
node whose four GPUs are gres on stand-in device files, configured in a folder of the test
run's own, on ports of its own. Jobs are real `sbatch` jobs. `.ci/run` and `make test` install
slurm-wlm; without it the tests that need it fail with what to install (never skip)."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.helpers import free_port

GPU_TYPE = "h100"
GPUS = 4


def _munge() -> None:
    """munged, as root, started if it is not running (the package installs its key)."""
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return
    run = Path("/run/munge")
    run.mkdir(parents=True, exist_ok=True)
    shutil.chown(run, "munge", "munge")
    subprocess.run(["munged", "--force"], check=True, capture_output=True)


class Slurm:
    """One controller and one node daemon, started in `folder`; `env` is what Slurm's
    commands need to find them (SLURM_CONF)."""

    def __init__(self, folder: Path):
        missing = [c for c in ("slurmctld", "slurmd", "sbatch", "scontrol", "munged")
                   if shutil.which(c) is None]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not found: install Debian's slurm-wlm "
                               "(apt-get install -y slurm-wlm), as .ci/run does")
        self.folder = folder
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: dict[str, subprocess.Popen] = {}
        self._configure()

    def _configure(self, extra: str = "") -> None:
        f = self.folder
        for name in ("state", "spool", "dev"):
            (f / name).mkdir(exist_ok=True)
        for k in range(GPUS):
            (f / "dev" / f"nvidia{k}").touch()
        self.conf.write_text(f"""ClusterName=gpuloans-test
SlurmctldHost={self.node}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd.pid
SlurmctldLogFile={f}/slurmctld.log
SlurmdLogFile={f}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
JobCompType=jobcomp/none
{extra}
NodeName={self.node} Gres=gpu:{GPU_TYPE}:{GPUS} CPUs={os.cpu_count() or 2} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        (f / "gres.conf").write_text(
            f"Name=gpu Type={GPU_TYPE} File={f}/dev/nvidia[0-{GPUS - 1}]\n")

    def start(self) -> "Slurm":
        _munge()
        self.start_controller()
        self.daemons["slurmd"] = subprocess.Popen(
            ["slurmd", "-D", "-f", str(self.conf)], env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._until(lambda: self.command("sinfo", "-h", "-o", "%T").stdout.strip() == "idle",
                    "the node to be idle")
        return self

    def start_controller(self, *, clear: bool = True) -> None:
        """slurmctld; `clear` starts it with no saved state (no jobs of an earlier run)."""
        self.daemons["slurmctld"] = subprocess.Popen(
            ["slurmctld", "-D", *(["-c"] if clear else []), "-f", str(self.conf)], env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._until(lambda: self.command("scontrol", "ping").returncode == 0,
                    "slurmctld to answer")

    def stop_controller(self) -> None:
        daemon = self.daemons.pop("slurmctld")
        daemon.terminate()
        daemon.wait(timeout=30)

    def stop(self) -> None:
        for daemon in self.daemons.values():
            daemon.terminate()
        for daemon in self.daemons.values():
            daemon.wait(timeout=30)
        self.daemons.clear()

    def command(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=60)

    def sbatch(self, *options: str, seconds: int = 600) -> str:
        """A job that sleeps (runs no GPU process), submitted with `options`; its id once it
        runs."""
        done = self.command("sbatch", "--parsable", "-c1", "-o", "/dev/null", *options,
                            "--wrap", f"sleep {seconds}")
        assert done.returncode == 0, done.stderr
        job = done.stdout.strip().split(";")[0]
        self._until(lambda: self.state(job) == "RUNNING", f"job {job} to run")
        return job

    def state(self, job: str) -> str:
        return self.command("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()

    def cancel_all(self) -> None:
        self.command("scancel", "--full", "-u", "root")
        self._until(lambda: not self.command("squeue", "-h").stdout.strip(), "jobs to end")

    def _until(self, check, what: str, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.3)
        logs = "".join(p.read_text()[-2000:] for p in self.folder.glob("*.log"))
        raise RuntimeError(f"Slurm: waited {seconds:g} s for {what}\n{logs}")
