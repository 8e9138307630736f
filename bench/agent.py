"""The agent's own cost: CPU share of one core and resident memory, 8 fake GPUs at the defaults.

    .venv/bin/python bench/agent.py [--seconds 120] [--gpus 8]

Runs gpuloans-agent (--collector fake:N, --poll 5, --interval 60) against a stub server on
loopback that accepts every batch, then reads the process's CPU time and peak RSS from /proc.
Targets: under 1% of one core and under 60 MB resident.
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
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as folder:
        token = Path(folder) / "token"
        token.write_text("gpln_bench")
        token.chmod(0o600)
        agent = subprocess.Popen(  # noqa: S603 - our own agent
            [sys.executable, "-m", "agent.cli", "--collector", f"fake:{args.gpus}",
             "--server", f"http://127.0.0.1:{server.server_port}", "--token-file", str(token),
             "--spool-dir", str(Path(folder) / "spool"), "--node", "bench"],
            cwd=ROOT, env={**os.environ, "LOG_LEVEL": "WARNING"})
        time.sleep(1.0)  # start-up (imports) is not the steady state
        start_cpu, started = cpu_seconds(agent.pid), time.monotonic()
        time.sleep(args.seconds)
        used, elapsed = cpu_seconds(agent.pid) - start_cpu, time.monotonic() - started
        rss = peak_rss_mb(agent.pid)
        agent.terminate()
        agent.wait(timeout=15)
    server.shutdown()
    share = used / elapsed
    print(f"{args.gpus} fake GPUs, poll 5 s, interval 60 s, {elapsed:.0f} s: "
          f"CPU {share:.2%} of one core (target < 1%), peak RSS {rss:.1f} MB (target < 60 MB), "
          f"{Stub.batches} batches posted")


if __name__ == "__main__":
    main()
