"""The agent's own cost: CPU share of one core and resident memory, 8 fake GPUs at the defaults,
with each allocation source.

    .venv/bin/python bench/agent.py [--seconds 60] [--gpus 8] [--sources processes,kubelet,slurm]

Runs gpuloans-agent (--collector fake:N, --poll 5, --interval 60) against a stub server on
loopback that accepts every batch, once per allocation source, then reads the process's CPU
time (its children's included: the squeue it runs) and peak RSS from /proc. The kubelet source
asks a stand-in kubelet (agent.holders.stand_in: the real gRPC API on a unix socket) that has
given half the GPUs to pods; the Slurm source runs a stand-in squeue that prints two jobs
holding half the GPUs and counts its calls (each a question to slurmctld; the agent's parsing and
process start are measured, slurmctld's work is not); `slurm-records` reads the prolog's
records of the same two jobs, with that squeue on the path too, so its count shows that it asks
slurmctld nothing. Targets: under 1% of one core and under 60 MB resident.
"""

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The agent package, not this file (whose folder Python puts first on the path).
sys.path.insert(0, str(ROOT))


class Stub(http.server.BaseHTTPRequestHandler):
    batches = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.batches += 1
        answer = json.dumps({"accepted": len(body["samples"]), "duplicates": 0,
                             "rejected": []}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def cpu_seconds(pid: int) -> float:
    """The process's CPU time and its waited-for children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# Two jobs holding half the GPUs, as Slurm 22.05's `squeue --json` prints them (cut short).
JOBS = json.dumps({"jobs": [
    {"job_id": job, "user_name": user, "account": account, "job_state": "RUNNING",
     "partition": "gpu", "nodes": "bench", "gres_detail": [f"gpu:h100:2(IDX:{idx})"],
     "name": "wrap"}
    for job, user, account, idx in ((101, "alice", "team-a", "0-1"), (102, "bob", "proj-x", "2-3"))
]})
# Each call is counted: a call of squeue is a question to slurmctld.
SQUEUE = ("#!/bin/sh\necho >> \"$(dirname \"$0\")/calls\"\ncat <<'JOBS'\n" + JOBS
          + "\nJOBS\n")
RECORDS = {"101": "job=101\naccount=team-a\nuser=alice\ngpus=0-1\nstart=1764800000\n",
           "102": "job=102\naccount=proj-x\nuser=bob\ngpus=2-3\nstart=1764800000\n",
           "99.ended": "job=99\naccount=team-a\nuser=alice\ngpus=0-3\nstart=1764790000\n"
                       "end=1764799000\n"}


def source_options(source: str, folder: Path, gpus: int) -> tuple[list[str], dict, object]:
    """The agent's options and environment for `source`, and whatever serves it."""
    if source == "kubelet":
        from agent.collectors.fake import FakeCollector
        from agent.holders.stand_in import Assignment, Node, serve

        uuids = FakeCollector(gpus, node="bench").uuids
        node = Node(allocatable={"nvidia.com/gpu": uuids},
                    assignments=[Assignment("team-a", f"train-{k}", "main", [uuid])
                                 for k, uuid in enumerate(uuids[: gpus // 2])])
        socket = folder / "kubelet.sock"
        return (["--allocation-source", "kubelet", "--kubelet-socket", str(socket)], {},
                serve(str(socket), node))
    if source.startswith("slurm"):
        squeue = folder / "bin" / "squeue"
        squeue.parent.mkdir()
        squeue.write_text(SQUEUE)
        squeue.chmod(0o755)
        records = folder / "records"
        records.mkdir()
        for name, text in RECORDS.items():
            (records / name).write_text(text)
        return (["--allocation-source", "slurm"]
                + (["--slurm-records", str(records)] if source == "slurm-records" else []),
                {"PATH": f"{squeue.parent}:{os.environ['PATH']}"}, None)
    return [], {}, None


def controller_calls(folder: Path) -> int:
    calls = folder / "bin" / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def measure(source: str, seconds: float, gpus: int, port: int
            ) -> tuple[float, float, tuple[int, float]]:
    """CPU share of one core, peak RSS (MB), and questions to slurmctld in the seconds the agent
    with `source` ran."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        token = folder / "token"
        token.write_text("gpln_bench")
        token.chmod(0o600)
        options, env, served = source_options(source, folder, gpus)
        agent = subprocess.Popen(  # noqa: S603 - our own agent
            [sys.executable, "-m", "agent.cli", "--collector", f"fake:{gpus}",
             "--server", f"http://127.0.0.1:{port}", "--token-file", str(token),
             "--spool-dir", str(folder / "spool"), "--node", "bench", *options],
            cwd=ROOT, env={**os.environ, "LOG_LEVEL": "WARNING", **env})
        launched = time.monotonic()
        time.sleep(1.5)  # start-up (imports) is not the steady state
        start_cpu, started = cpu_seconds(agent.pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(agent.pid) - start_cpu, time.monotonic() - started
        # Questions to slurmctld over the agent's whole run: one at the start, then one a
        # minute with squeue, none with the records.
        calls, lived = controller_calls(folder), time.monotonic() - launched
        rss = peak_rss_mb(agent.pid)
        agent.terminate()
        agent.wait(timeout=15)
        if served is not None:
            served.stop(None)
    return used / elapsed, rss, (calls, lived)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="for each source")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--sources", default="processes,kubelet,slurm,slurm-records")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"{args.gpus} fake GPUs, poll 5 s, interval 60 s, {args.seconds:g} s a source",
          flush=True)
    for source in args.sources.split(","):
        share, rss, calls = measure(source, args.seconds, args.gpus, server.server_port)
        print(f"  allocation from {source:<13} CPU {share:.2%} of one core (target < 1%), "
              f"peak RSS {rss:.1f} MB (target < 60 MB)"
              + (f", slurmctld asked {calls[0]} times in {calls[1]:.0f} s"
                 if source.startswith("slurm") else ""), flush=True)
    server.shutdown()
    print(f"{Stub.batches} batches posted")


if __name__ == "__main__":
    main()
