"""A real Slurm for the tests: Debian's slurmctld, slurmd and slurmdbd (and munge) on this
machine, one node whose four GPUs are gres on stand-in character devices, configured in a folder of
the test run's own, on ports of its own, with accounting in a database of its own on the
machine's MariaDB (limits enforced: AccountingStorageEnforce=associations,limits,qos,safe, with
multifactor priority and a 10-minute default time limit, as GPU-minute budgets need), and the
agent's prolog and epilog (deploy/slurm/) writing job records into `records`. Jobs are real
`sbatch` jobs of the accounts ACCOUNTS. `.ci/run` and `make test` install slurm-wlm and
slurmdbd; without them the tests that need them fail with what to install (never skip)."""

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

from tests.helpers import free_port

CLUSTER = "gpuloans-test"
GPU_TYPE = "h100"
GPUS = 4
ACCOUNTS = ("team-a", "proj-x", "team-b")
# On the machine's MariaDB, one for each test run (two runs at once keep to their own), made
# afresh and dropped at the end.
DATABASE = DB_USER = f"gpuloans_slurm_{os.getpid()}"
DB_PASSWORD = "slurm-test-only"


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
        missing = [c for c in ("slurmctld", "slurmd", "slurmdbd", "sbatch", "scontrol",
                               "sacct", "sacctmgr", "munged", "mysql")
                   if shutil.which(c) is None]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not found: install Debian's slurm-wlm "
                               "and slurmdbd (apt-get install -y slurm-wlm slurmdbd), as "
                               ".ci/run does, and run MariaDB")
        self.folder = folder
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: dict[str, subprocess.Popen] = {}
        self._configure()

    def _configure(self) -> None:
        f = self.folder
        dbd_port = free_port()
        dbd = f / "slurmdbd.conf"  # slurmdbd reads it beside SLURM_CONF
        dbd.write_text(f"""AuthType=auth/munge
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser=root
PidFile={f}/slurmdbd.pid
LogFile={f}/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser={DB_USER}
StoragePass={DB_PASSWORD}
StorageLoc={DATABASE}
""")
        dbd.chmod(0o600)
        for name in ("state", "spool", "dev"):
            (f / name).mkdir(exist_ok=True)
        for k in range(GPUS):  # character devices (/dev/null's numbers), as Slurm's GPU
            device = f / "dev" / f"nvidia{k}"  # plugin needs to give SLURM_JOB_GPUS
            if not device.is_char_device():
                device.unlink(missing_ok=True)
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        # The shipped prolog and epilog, keeping their records in the run's own folder.
        self.records = f / "records"
        deploy = Path(__file__).resolve().parent.parent / "deploy" / "slurm"
        for script in ("prolog", "epilog"):
            wrapper = f / script
            wrapper.write_text(f"#!/bin/sh\nGPULOANS_SLURM_RECORDS={self.records} "
                               f"exec {deploy}/gpuloans-{script}\n")
            wrapper.chmod(0o755)
        self.conf.write_text(f"""ClusterName={CLUSTER}
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
Prolog={f}/prolog
Epilog={f}/epilog
PrologFlags=Alloc
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd_port}
AccountingStorageEnforce=associations,limits,qos,safe
PriorityType=priority/multifactor
AccountingStorageTRES=gres/gpu
NodeName={self.node} Gres=gpu:{GPU_TYPE}:{GPUS} CPUs={os.cpu_count() or 2} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE DefaultTime=10 State=UP
""")
        (f / "gres.conf").write_text(
            f"Name=gpu Type={GPU_TYPE} File={f}/dev/nvidia[0-{GPUS - 1}]\n")

    def start(self) -> "Slurm":
        """Every daemon, in order; whatever started is stopped again if one does not come up
        (no daemon outlives a failed start)."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> "Slurm":
        _munge()
        self._database()
        self.daemons["slurmdbd"] = subprocess.Popen(
            ["slurmdbd", "-D"], env=self.env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self._until(lambda: self.command("sacctmgr", "-n", "show", "cluster").returncode == 0,
                    "slurmdbd to answer")
        self.sacctmgr("add", "cluster", CLUSTER)
        self.sacctmgr("add", "account", ",".join(ACCOUNTS))
        self.sacctmgr("add", "user", "root", f"account={','.join(ACCOUNTS)}")
        self.start_controller()
        self.start_node()
        return self

    @staticmethod
    def _database(*, drop: bool = False) -> None:
        statements = (f"DROP DATABASE IF EXISTS {DATABASE}; "
                      f"DROP USER IF EXISTS '{DB_USER}'@'localhost';") + ("" if drop else (
            f"CREATE DATABASE {DATABASE}; CREATE USER '{DB_USER}'@'localhost' IDENTIFIED BY "
            f"'{DB_PASSWORD}'; GRANT ALL ON {DATABASE}.* TO '{DB_USER}'@'localhost';"))
        done = subprocess.run(["mysql", "-uroot", "-e", statements], capture_output=True,
                              text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"MariaDB: {done.stderr.strip()} (is it running? .ci/run "
                               "starts it)")

    def sacctmgr(self, *args: str) -> str:
        """sacctmgr, answering its question itself (-i); fails the test if it fails."""
        done = self.command("sacctmgr", "-i", *args)
        assert done.returncode == 0, f"sacctmgr {' '.join(args)}: {done.stderr}{done.stdout}"
        return done.stdout

    def start_controller(self, *, clear: bool = True) -> None:
        """slurmctld; `clear` starts it with no saved state (no jobs of an earlier run)."""
        self.daemons["slurmctld"] = subprocess.Popen(
            ["slurmctld", "-D", *(["-c"] if clear else []), "-f", str(self.conf)], env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._until(lambda: self.command("scontrol", "ping").returncode == 0,
                    "slurmctld to answer")

    def start_node(self) -> None:
        """slurmd, until the node is idle."""
        self.daemons["slurmd"] = subprocess.Popen(
            ["slurmd", "-D", "-f", str(self.conf)], env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._until(lambda: self.command("sinfo", "-h", "-o", "%T").stdout.strip() == "idle",
                    "the node to be idle")

    def restart_node(self) -> None:
        """slurmd again, jobs cancelled first. Slurm 22.05's controller, restarted with its saved
        state, loses the GPU indices of the jobs it recovers (squeue --json shows them with no
        gres_detail) and keeps their GPUs busy after they end, so that the next job asking for
        one gets none, until the node registers again."""
        self.cancel_all()
        daemon = self.daemons.pop("slurmd")
        daemon.terminate()
        daemon.wait(timeout=30)
        self.start_node()

    def stop_controller(self) -> None:
        daemon = self.daemons.pop("slurmctld")
        daemon.terminate()
        daemon.wait(timeout=30)

    def stop(self) -> None:
        """The jobs (so that no job step outlives its node daemon), then the daemons: the
        controller and node first, accounting last."""
        if "slurmctld" in self.daemons and "slurmd" in self.daemons:
            self.command("scancel", "--full", "-u", "root")
            with contextlib.suppress(RuntimeError):  # the daemons are stopped all the same
                self._until(lambda: not self.command("squeue", "-h").stdout.strip(),
                            "jobs to end", seconds=30)
        for name in ("slurmd", "slurmctld", "slurmdbd"):
            daemon = self.daemons.pop(name, None)
            if daemon is not None:
                daemon.terminate()
                daemon.wait(timeout=30)
        self._database(drop=True)

    def command(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """A Slurm command against this Slurm (`env`: variables to add, SLURM_TIME_FORMAT)."""
        return subprocess.run(args, env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=60)

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
