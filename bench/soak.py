"""Soak: simulated fleet traffic through gunicorn on PostgreSQL, with faults injected at random.

    .venv/bin/python bench/soak.py [--minutes 60] [--agents 50] [--speed 10] [--fault-every 45]

Each agent is the real agent (fake collector with 8 GPUs, spool on disk, HTTP client) in a
thread of its own, on a clock running --speed times faster than the wall's, so an hour of wall
time carries --speed hours of fleet usage (one 60-second interval per GPU). Every --fault-every
seconds on average one fault strikes:

  server-kill       gunicorn SIGKILLed mid-traffic, started again 1-3 s later
  postgres-restart  the PostgreSQL cluster restarted (pg_ctlcluster; needs the machine's admin)
  cache-down        the Redis holding the throttles stopped for 5-10 s
  agent-crash       an agent dies right after a batch was stored, before it could forget the
                    batch; it starts again on the same spool and sends the batch again

At the end the agents drain their spools, and the script prints what was sent (spooled),
stored, retried and lost (must be 0), any server error (must be none), and whether every rollup
equals a recount. Needs PostgreSQL (BENCH_DATABASE_URL, default .../gpuloans_soak, made afresh)
and redis-server.
"""

import argparse
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from agent.client import Client  # noqa: E402
from agent.collectors.fake import FakeCollector  # noqa: E402
from agent.runner import Agent  # noqa: E402
from agent.spool import Spool  # noqa: E402
from bench.common import (  # noqa: E402
    SECRET,
    database_url,
    node_tokens,
    recreate_database,
    served_static,
)

DATABASE_URL = database_url("gpuloans_soak")
GPUS = 8
POLL = timedelta(seconds=5)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Crash(Exception):
    """An agent process dying at the worst moment: after the server stored a batch."""


class SoakClient(Client):
    def __init__(self, *args, tally: Counter, **kwargs):
        super().__init__(*args, **kwargs)
        self.tally, self.crash_next = tally, False

    def send(self, samples, dropped):
        outcome = super().send(samples, dropped)
        if outcome.done:
            self.tally["batches stored"] += 1
            words = outcome.message.split()
            if len(words) > 2 and words[1] == "accepted,":
                self.tally["duplicates answered"] += int(words[2])
            if self.crash_next:
                self.crash_next = False
                raise Crash
        else:
            kind = outcome.message.split(":")[0]
            self.tally[f"retried after {kind}"] += 1
        return outcome


class Fleet:
    def __init__(self, url: str, tokens: list[tuple[str, str]], folder: Path, start: datetime,
                 speed: float):
        self.url, self.folder, self.start, self.speed = url, folder, start, speed
        self.tally: Counter = Counter()
        self.sent: set[tuple[str, str]] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.draining = threading.Event()
        self.clients: list[SoakClient] = []
        self.threads = [threading.Thread(target=self.run, args=(k, name, token), daemon=True)
                        for k, (name, token) in enumerate(tokens)]
        self.wall0 = time.monotonic()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(time.monotonic() - self.wall0) * self.speed)

    def agent(self, k: int, name: str, token: str) -> Agent:
        spool = Spool(self.folder / name)
        put = spool.put

        def recording_put(samples: list[dict]) -> Path:
            with self.lock:
                self.sent.update((s["gpu_uuid"], s["ts"]) for s in samples)
            return put(samples)

        spool.put = recording_put
        client = SoakClient(self.url, token, name, timeout=30, tally=self.tally)
        self.clients[k] = client
        return Agent(FakeCollector(GPUS, node=name, seed=k), spool, client, interval_s=60)

    def run(self, k: int, name: str, token: str) -> None:
        agent = self.agent(k, name, token)
        polled = self.start
        while not self.stopping.is_set():
            if not self.draining.is_set():
                while polled + POLL <= self.now():
                    polled += POLL
                    agent.poll_once(polled)
            try:
                wait = agent.drain()
            except Crash:
                self.tally["agent crashes"] += 1
                agent = self.agent(k, name, token)  # a new process on the same spool
                continue
            if self.draining.is_set() and not agent.spool.pending():
                return
            self.stopping.wait(min(wait, 2.0) if wait else 0.5)

    def go(self) -> None:
        self.clients = [None] * len(self.threads)
        for thread in self.threads:
            thread.start()

    def drain(self, seconds: float) -> None:
        self.draining.set()
        deadline = time.monotonic() + seconds
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        self.stopping.set()


class Services:
    """gunicorn and the throttles' Redis, each stoppable and startable again."""

    def __init__(self, workers: int):
        self.port, self.redis_port, self.workers = free_port(), free_port(), workers
        self.metrics = Path(tempfile.mkdtemp(prefix="soak-metrics-"))
        self.log = Path(tempfile.gettempdir()) / "gpuloans-soak-server.log"
        self.log.write_text("")
        self.env = {**os.environ, "DATABASE_URL": DATABASE_URL, "DEBUG": "0",
                    "SECRET_KEY": SECRET, "ALLOWED_HOSTS": "127.0.0.1", "BEHIND_TLS_PROXY": "0",
                    "LOG_LEVEL": "ERROR", "DJANGO_SETTINGS_MODULE": "config.settings",
                    "CACHE_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                    "INGEST_REQUESTS_PER_MINUTE": "30",
                    "PROMETHEUS_MULTIPROC_DIR": str(self.metrics), **served_static()}
        self.web: subprocess.Popen | None = None
        self.redis: subprocess.Popen | None = None

    def start_web(self) -> None:
        self.web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "config/gunicorn.py",
             "--workers", str(self.workers), "--bind", f"127.0.0.1:{self.port}"],
            cwd=ROOT, env=self.env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=self.log.open("a"))

    def kill_web(self) -> None:
        os.killpg(self.web.pid, signal.SIGKILL)
        self.web.wait()

    def start_redis(self) -> None:
        self.redis = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.redis_port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL)

    def stop_redis(self) -> None:
        self.redis.terminate()
        self.redis.wait()

    def stop(self) -> None:
        if self.web and self.web.poll() is None:
            os.killpg(self.web.pid, signal.SIGTERM)
            self.web.wait(timeout=30)
        if self.redis and self.redis.poll() is None:
            self.stop_redis()
        shutil.rmtree(self.metrics, ignore_errors=True)


def restart_postgresql() -> None:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    subprocess.run([shutil.which("pg_ctlcluster") or "pg_ctlcluster",
                    "--skip-systemctl-redirect", version, "main", "restart", "--mode", "fast"],
                   check=True, capture_output=True, timeout=120)


def inject(kind: str, services: Services, fleet: Fleet, rng: random.Random) -> None:
    if kind == "server-kill":
        services.kill_web()
        time.sleep(rng.uniform(1, 3))
        services.start_web()
    elif kind == "postgres-restart":
        restart_postgresql()
    elif kind == "cache-down":
        services.stop_redis()
        time.sleep(rng.uniform(5, 10))
        services.start_redis()
    elif kind == "agent-crash":
        rng.choice([c for c in fleet.clients if c is not None]).crash_next = True


def prepare(agents: int, since: datetime) -> list[tuple[str, str]]:
    """The tenant and the agents' nodes, registered at `since`, before the simulated clock
    starts (intake takes a node's samples from its registration on)."""
    code = f"""
from datetime import datetime
from loans.models import Tenant
from metering.models import Node
tenant = Tenant.objects.create(slug="soak", name="Soak")
for k in range({agents}):
    node = Node.objects.create(name=f"soak-{{k:02d}}", default_tenant=tenant,
                               created_at=datetime.fromisoformat("{since.isoformat()}"))
    print(node.name, node.issue_token())
"""
    env = {**os.environ, "DATABASE_URL": DATABASE_URL, "DEBUG": "0", "SECRET_KEY": SECRET,
           "ALLOWED_HOSTS": "127.0.0.1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                   check=True)
    return node_tokens(code, env, "soak-")


RECOUNT = """
WITH raw AS (
    SELECT tenant_id, date_trunc('hour', ts, 'UTC') AS hour,
           sum(CASE WHEN allocated THEN interval_s * fraction ELSE 0 END) AS alloc,
           count(*) AS n
    FROM metering_usagesample GROUP BY 1, 2
)
SELECT count(*) FILTER (WHERE h.hour IS NULL OR r.hour IS NULL OR r.n <> h.sample_count
                          OR abs(r.alloc - h.allocated_gpu_s) > 1e-6), count(*)
FROM raw r FULL JOIN metering_tenanthour h
     ON h.hour = r.hour AND h.tenant_id IS NOT DISTINCT FROM r.tenant_id
"""


def stored_keys() -> set[tuple[str, str]]:
    with psycopg.connect(DATABASE_URL) as conn:
        rows = conn.execute("SELECT g.uuid, s.ts FROM metering_usagesample s "
                            "JOIN metering_gpu g ON g.id = s.gpu_id").fetchall()
    return {(uuid, ts.astimezone(UTC).isoformat().replace("+00:00", "Z")) for uuid, ts in rows}


def normalise(key: tuple[str, str]) -> tuple[str, str]:
    uuid, ts = key
    return uuid, datetime.fromisoformat(ts).astimezone(UTC).isoformat().replace("+00:00", "Z")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--speed", type=float, default=10)
    parser.add_argument("--fault-every", type=float, default=45)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--faults", default="server-kill,postgres-restart,cache-down,agent-crash")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the agents' retries are counted, not logged
    rng = random.Random(args.seed)
    kinds = [k for k in args.faults.split(",") if k]
    seconds = args.minutes * 60
    print(f"soak: {args.agents} agents x {GPUS} GPUs, {args.minutes:g} min at {args.speed:g}x "
          f"({args.minutes * args.speed / 60:g} h of usage), a fault every ~{args.fault_every:g}"
          f" s from {kinds}; database {DATABASE_URL}", flush=True)
    recreate_database(DATABASE_URL)
    start = (datetime.now(UTC) - timedelta(seconds=seconds * args.speed)).replace(
        second=0, microsecond=0)
    tokens = prepare(args.agents, start - timedelta(minutes=1))
    services = Services(args.workers)
    services.start_redis()
    services.start_web()
    time.sleep(3)
    folder = Path(tempfile.mkdtemp(prefix="soak-spools-"))
    fleet = Fleet(f"http://127.0.0.1:{services.port}", tokens, folder, start, args.speed)
    faults: Counter = Counter()
    began = time.monotonic()
    try:
        fleet.go()
        while time.monotonic() - began < seconds:
            time.sleep(min(rng.expovariate(1 / args.fault_every),
                           max(0.0, seconds - (time.monotonic() - began))))
            if time.monotonic() - began >= seconds or not kinds:
                break
            kind = rng.choice(kinds)
            faults[kind] += 1
            print(f"  {time.monotonic() - began:7.0f} s  {kind}", flush=True)
            inject(kind, services, fleet, rng)
        fleet.drain(300)
    finally:
        fleet.stopping.set()
        services.stop()
        shutil.rmtree(folder, ignore_errors=True)
    sent = {normalise(key) for key in fleet.sent}
    stored = stored_keys()
    lost, extra = sent - stored, stored - sent
    with psycopg.connect(DATABASE_URL) as conn:
        wrong, hours = conn.execute(RECOUNT).fetchone()
    print(f"faults injected: {dict(faults) or 'none'}")
    print(f"sent (spooled):  {len(sent):,} samples")
    print(f"stored:          {len(stored):,} samples "
          f"({fleet.tally['batches stored']:,} batches answered 202)")
    print("retried:         " + (", ".join(f"{n:,} {what}" for what, n in sorted(
        fleet.tally.items()) if what.startswith("retried")) or "none"))
    print(f"agent crashes:   {fleet.tally['agent crashes']} "
          f"(duplicates the server recognised: {fleet.tally['duplicates answered']:,})")
    print(f"lost:            {len(lost):,}   stored but never sent: {len(extra):,}")
    print(f"rollups:         {hours - wrong} of {hours} tenant-hours equal a recount")
    errors = services.log.read_text().count("Internal Server Error")
    print(f"server errors:   {errors} (log: {services.log})")
    if lost or extra or wrong or errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
