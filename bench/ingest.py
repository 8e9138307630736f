"""Ingestion throughput: the product's endpoint against raw COPY and a DRF baseline, in one run.

    .venv/bin/python bench/ingest.py [--seconds 20] [--rounds 4] [--clients 4] [--workers 2]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/gpuloans_bench;
the database is dropped and created afresh). Four phases, each for --seconds in all, with
500-sample batches of distinct samples:

  raw COPY    the same batches COPYed straight into the sample table, one transaction per batch,
              from as many connections as the server has workers: no HTTP, staging or rollups
              (the sessions keep the database's rollup trigger from firing: bench.common.
              WITHOUT_ROLLUPS); the database's durable-batch limit for this schema (a
              bulk load of a million rows in one transaction is not that limit)
  product     POST /api/v1/samples under gunicorn (sync workers) from --clients processes
  in process  the product's ingestion (metering.intake.wire and metering.intake.ingest: validation,
              attribution, COPY, rollups) called in process, one process per server worker:
              the product without HTTP, so that its cost splits between the database work and
              the web tier
  DRF         the same batches to a DRF Serializer(many=True) + bulk_create endpoint

The load generators run on the machine they measure, so they do as little as they can: a
client's request body is encoded once and each batch only puts its ten times in (Bodies), and
raw COPY's rows are each GPU's fixed values and the batch's times. Building and encoding 500
dicts a batch had cost the clients 1.1 to 1.3 CPU-ms a batch, over 40% of raw COPY's whole
cost; now about 0.5.

The speed of this kind of machine drifts by 15-25% over a minute, so raw COPY, the product and
the product in process run in --rounds turns, each round starting with the next of them, and
their ratios compare like with like. Each phase also prints how busy the machine's cores were
and the CPU time one batch cost the whole machine, and of that the web workers', PostgreSQL's
(when it runs on this machine) and the client processes' (the load generators; in the
in-process phase they run the ingestion too).

Then it checks that the product's rollups equal a recount of its raw samples. Prints samples/s,
p50/p99 batch latency and the ratios.

--trigger is an experiment on the bench's own database, to see what the database's share of
the endpoint costs: `checks` replaces the rollup trigger's function (metering_add_rollups)
with its first part only (the devices' lock, the span update and the overlap check; no
rollups), `empty` with one that returns at once (the endpoint is then HTTP, validation,
attribution and the COPY). Either leaves the rollups unkept, and the run says so.
"""

import argparse
import gc
import http.client
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import django
import orjson
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import cpu  # noqa: E402
from bench.common import (  # noqa: E402
    SECRET,
    database_url,
    in_process,
    node_tokens,
    recreate_database,
    served_static,
    without_rollups,
)

BATCH = 500
GPUS_PER_CLIENT = 50
PORT = int(os.environ.get("BENCH_PORT", "8765"))
DATABASE_URL = database_url("gpuloans_bench")
# Every phase's batches go forward in time from here, as agents send them; a 20-second phase at
# this machine's pace reaches about 50 days on (raw COPY, the fastest), so 60 days of
# history keep the whole run in the past, inside raw retention and in daily partitions.
HISTORY_DAYS = 60
BASE = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(days=HISTORY_DAYS)
# --trigger: where migration 0014's function is cut, its first statement (empty) or where
# its rollups begin (checks).
CUT_AT = {"empty": "    -- Each device's span", "checks": "    -- A sample counts in the hours"}


def server_env() -> dict:
    return {
        **os.environ, "DATABASE_URL": DATABASE_URL, "DEBUG": "0",
        "SECRET_KEY": SECRET,
        "ALLOWED_HOSTS": "127.0.0.1", "INGEST_REQUESTS_PER_MINUTE": "0",
        "DJANGO_SETTINGS_MODULE": "bench.settings", "LOG_LEVEL": "WARNING",
        "BEHIND_TLS_PROXY": "0", "RAW_RETENTION_DAYS": str(HISTORY_DAYS + 5),
        "BACKFILL_HORIZON_DAYS": str(HISTORY_DAYS + 5), **served_static(),
    }


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=server_env(), check=True)


def prepare(clients: int) -> list[tuple[str, str]]:
    """A tenant, product and baseline nodes, and partitions for the whole history."""
    code = f"""
from datetime import date, timedelta
from loans.models import Tenant
from metering.models import AttributionRule, Node
from metering.partitions import ensure_partitions
tenant = Tenant.objects.create(slug="bench", name="Bench")
gpus = {GPUS_PER_CLIENT}  # each client's node reports this many GPUs: its device limit
for c in range({clients}):
    node = Node.objects.create(name=f"bench-{{c}}", default_tenant=tenant, max_devices=gpus)
    print(node.name, node.issue_token())
    Node.objects.create(name=f"base-{{c}}", max_devices=gpus)
    Node.objects.create(name=f"direct-{{c}}", default_tenant=tenant, max_devices=gpus)
# Registered before the history the phases send, which intake accepts only from then on.
Node.objects.update(created_at=Node.objects.first().created_at - timedelta(days={HISTORY_DAYS + 2}))
today = date.today()
days = {{today - timedelta(days=k) for k in range({HISTORY_DAYS + 2})}}
ensure_partitions(days | {{today + timedelta(days=1)}})
"""
    return node_tokens(code, server_env(), "bench-")


STEPS = BATCH // GPUS_PER_CLIENT  # a batch: each GPU's samples of ten minutes


def moments(batch: int) -> list[datetime]:
    """The ten minutes of batch number `batch`, each after the last batch's, as agents send."""
    return [BASE + timedelta(minutes=batch * STEPS + step) for step in range(STEPS)]


def samples(client: int, prefix: str, stamps: list[str]) -> list[dict]:
    """A batch of a client: its 50 GPUs at each of `stamps`, in time order."""
    return [{
        "gpu_uuid": f"GPU-{prefix}-{client:02d}-{gpu:03d}", "gpu_index": gpu % 8,
        "model": "NVIDIA H100 80GB HBM3", "ts": stamp, "interval_s": 60,
        "allocated": gpu % 5 != 0, "fraction": 1.0, "util_pct": float(gpu % 100),
        "mem_used_mib": 40000 + gpu, "power_w": 350.5, "temp_c": 60,
        "owner": {"namespace": "bench", "pod": f"train-{gpu % 7}"},
    } for stamp in stamps for gpu in range(GPUS_PER_CLIENT)]


class Bodies:
    """A client's request bodies. The load generators share the machine with what they
    measure, so they do as little as they can: the body is encoded once with a marker for
    each of the batch's ten timestamps, and each batch only puts its times in (about 45 us,
    where building and encoding 500 dicts took about 0.5 ms a batch)."""

    MARK = re.compile(rb"@STEP(\d+)@")

    def __init__(self, client: int, node: str, prefix: str):
        template = orjson.dumps({"node": node, "agent_version": "bench", "samples": samples(
            client, prefix, [f"@STEP{step}@" for step in range(STEPS)])})
        pieces = self.MARK.split(template)
        self.text, self.steps = pieces[0::2], [int(step) for step in pieces[1::2]]

    def body(self, batch: int) -> bytes:
        stamps = [moment.isoformat().replace("+00:00", "Z").encode()
                  for moment in moments(batch)]
        out = [self.text[0]]
        for step, text in zip(self.steps, self.text[1:], strict=True):
            out += (stamps[step], text)
        return b"".join(out)


def post_loop(args: tuple) -> tuple[int, list[float], int, int]:
    """One client posting batches for `seconds`, from its batch number `first` on; returns
    samples accepted, latencies, failures and batches sent."""
    client, path, node, token, prefix, seconds, first = args
    accepted, latencies, failures, batch = 0, [], 0, first
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    bodies = Bodies(client, node, prefix)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        body = bodies.body(batch)
        batch += 1
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read()
        conn.close()
        latencies.append(time.perf_counter() - started)
        if response.status == 202:
            accepted += orjson.loads(answer)["accepted"]
        else:
            failures += 1
    return accepted, latencies, failures, batch - first


def copy_loop(args: tuple) -> tuple[int, list[float], int, int]:
    """Raw COPY of the same shape of rows, one transaction per 500-row batch."""
    worker, seconds, first = args
    rows_done, latencies, batch = 0, [], first
    columns = ("gpu_id", "ts", "tenant_id", "owner_id", "interval_s", "allocated", "fraction",
               "util_pct", "mem_used_mib", "power_w", "temp_c")
    types = ["int4", "timestamptz", "int4", "int4", "int2", "bool", "float8", "float4", "int4",
             "float4", "int2"]
    # Each GPU's row but its time, as samples() has them: the product's seven owners are seven
    # small ids, and the tenant is the node's.
    gpus = [(1_000_000 + worker * 1000 + gpu, None, 1 + gpu % 7, 60, gpu % 5 != 0, 1.0,
             float(gpu % 100), 40000 + gpu, 350.5, 60) for gpu in range(GPUS_PER_CLIENT)]
    statement = f"COPY metering_usagesample ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    with psycopg.connect(DATABASE_URL) as conn:
        without_rollups(conn.execute)
        conn.commit()  # the setting stays with the session; each batch is its own transaction
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            rows = [(gpu[0], moment, *gpu[1:]) for moment in moments(batch) for gpu in gpus]
            batch += 1
            started = time.perf_counter()
            with conn.transaction(), conn.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types(types)
                for row in rows:
                    copy.write_row(row)
            latencies.append(time.perf_counter() - started)
            rows_done += len(rows)
    return rows_done, latencies, 0, batch - first


def ingest_loop(args: tuple) -> tuple[int, list[float], int, int]:
    """The product's ingestion called in process (Django is set up before the pool forks; each
    process opens its own connection)."""
    from django.db import connection

    from metering.intake import wire
    from metering.intake.ingest import ingest
    from metering.models import Node

    client, seconds, first = args
    node = Node.objects.get(name=f"direct-{client}")
    accepted, latencies, batch = 0, [], first
    bodies = Bodies(client, node.name, "direct")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        body = bodies.body(batch)
        batch += 1
        started = time.perf_counter()
        done = ingest(node, wire.parse(body), now=datetime.now(UTC))
        if done.rejected and not done.accepted:
            raise SystemExit(f"the in-process phase's batch was refused: {done.rejected[:1]}")
        accepted += done.accepted
        latencies.append(time.perf_counter() - started)
    connection.close()
    return accepted, latencies, 0, batch - first


class Phase:
    """One kind of load, run in one or more turns by a pool of processes; the figures add up
    over the turns, and each process goes on from the batch number where its last turn
    stopped, so no sample is ever sent twice."""

    def __init__(self, name: str, loop, jobs: list[tuple], split: cpu.Split):
        self.name, self.loop, self.jobs, self.split = name, loop, jobs, split
        self.next_batch = [0] * len(jobs)
        self.count = self.failures = self.batches = self.busy = self.total = 0
        self.elapsed = 0.0
        self.latencies: list[float] = []
        self.by_kind: dict[str, float] = {}

    def run(self, seconds: float) -> float:
        """One turn; returns its samples/s."""
        with multiprocessing.Pool(len(self.jobs)) as pool:
            kinds = self.split.read()
            busy, total = cpu.machine()
            started = time.perf_counter()
            results = pool.map(self.loop, [(*job, seconds, first) for job, first
                                           in zip(self.jobs, self.next_batch, strict=True)])
            elapsed = time.perf_counter() - started
            after = cpu.machine()
        # After the pool has exited: its processes' CPU time is now this process's children's.
        for kind, used in self.split.read().items():
            self.by_kind[kind] = self.by_kind.get(kind, 0.0) + used - kinds[kind]
        self.elapsed += elapsed
        self.busy += after[0] - busy
        self.total += after[1] - total
        count = 0
        for k, (done, latencies, failures, batches) in enumerate(results):
            count += done
            self.latencies += latencies
            self.failures += failures
            self.batches += batches
            self.next_batch[k] += batches
        self.count += count
        print(f"    {self.name:<10} {count / elapsed:>10,.0f} samples/s", flush=True)
        return count / elapsed

    def report(self) -> dict:
        latencies = sorted(self.latencies)
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0
        figures = {"name": self.name, "rate": self.count / self.elapsed, "count": self.count,
                   "p50": statistics.median(latencies) * 1000 if latencies else 0,
                   "p99": p99 * 1000, "batches": self.batches,
                   "cpu_ms": self.busy / cpu.TICKS / max(self.batches, 1) * 1000,
                   "busy": self.busy / max(self.total, 1)}
        print(f"  {self.name:<10} {figures['rate']:>10,.0f} samples/s  p50 {figures['p50']:6.1f} "
              f"ms  p99 {figures['p99']:6.1f} ms  {self.batches} batches, {self.failures} failed"
              f"  cores {figures['busy']:.0%} busy, {figures['cpu_ms']:.1f} CPU-ms a batch",
              flush=True)
        per_batch = {kind: used / max(self.batches, 1) * 1000
                     for kind, used in self.by_kind.items()}
        print(f"  {'':<10} of which: web workers {per_batch['web']:.1f}, PostgreSQL "
              f"{per_batch['PostgreSQL']:.1f}, client processes {per_batch['clients']:.1f}",
              flush=True)
        return figures


def start_server(workers: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--workers", str(workers),
         "--bind", f"127.0.0.1:{PORT}", "--log-level", "warning", "--timeout", "120"],
        cwd=ROOT, env=server_env(), start_new_session=True,
    )
    for _ in range(100):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not answer /healthz")


def rollups_exact() -> str:
    """Compare the bench tenant's rollups with a recount of its raw samples, in SQL, once the
    stale peaks are recounted (a beat job does it every minute in production). The bench's
    samples are minute-aligned and a minute long, so each lies in one hour and a tenant's
    peak is its most GPUs at one timestamp: this recount needs neither the split across hours
    nor the sweep the product makes, and checks them independently."""
    from metering import peaks

    peaks.refresh_all()
    query = """
    WITH raw AS (
        SELECT date_trunc('hour', ts, 'UTC') AS hour,
               sum(CASE WHEN allocated THEN interval_s * fraction ELSE 0 END) AS alloc,
               sum(CASE WHEN allocated THEN interval_s * fraction * COALESCE(util_pct, 0) / 100
                        ELSE 0 END) AS busy,
               count(*) AS n
        FROM metering_usagesample WHERE tenant_id = %(t)s GROUP BY 1
    ), inst AS (
        SELECT date_trunc('hour', ts, 'UTC') AS hour, max(g) AS peak FROM (
            SELECT ts, sum(fraction) AS g FROM metering_usagesample
            WHERE tenant_id = %(t)s AND allocated GROUP BY ts) x GROUP BY 1
    )
    SELECT count(*) FILTER (WHERE r.hour IS NULL OR h.hour IS NULL
                              OR abs(r.alloc - h.allocated_gpu_s) > 1e-6
                              OR abs(r.busy - h.busy_gpu_s) > 1e-6 OR r.n <> h.sample_count
                              OR abs(COALESCE(i.peak, 0) - h.peak_gpus) > 1e-9),
           count(*)
    FROM raw r FULL JOIN (SELECT * FROM metering_tenanthour WHERE tenant_id = %(t)s) h
         ON h.hour = r.hour
    LEFT JOIN inst i ON i.hour = r.hour
    """
    with psycopg.connect(DATABASE_URL) as conn:
        tenant = conn.execute("SELECT id FROM loans_tenant WHERE slug = 'bench'").fetchone()[0]
        wrong, hours = conn.execute(query, {"t": tenant}).fetchone()
    verdict = "" if not wrong else " (NOT EXACT)"
    return f"{hours - wrong} of {hours} hours equal a recount{verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trigger", choices=["product", *CUT_AT], default="product",
                        help="an experiment: the rollup trigger with its checks only, or empty")
    args = parser.parse_args()
    print(f"database {DATABASE_URL}, {args.workers} gunicorn workers, {args.clients} clients, "
          f"{BATCH}-sample batches, {args.seconds:g} s a phase in {args.rounds} rounds",
          flush=True)
    recreate_database(DATABASE_URL)
    manage("migrate", "-v0")
    if args.trigger != "product":
        replace_trigger(args.trigger)
    tokens = prepare(args.clients)
    # As the server's: the history is older than the default back-fill horizon, and samples
    # past it are refused (the in-process phase then measured refusals, 0 samples/s).
    os.environ["RAW_RETENTION_DAYS"] = str(HISTORY_DAYS + 5)
    os.environ["BACKFILL_HORIZON_DAYS"] = str(HISTORY_DAYS + 5)
    in_process(DATABASE_URL)
    django.setup()  # for the in-process phase, before its processes fork; no connection yet
    gc.freeze()  # so that the collector in a forked process never copies the parent's heap

    server = start_server(args.workers)
    split = cpu.Split(server.pid, cpu.postmaster(DATABASE_URL))
    copy = Phase("raw COPY", copy_loop, [(w,) for w in range(args.workers)], split)
    product = Phase("product", post_loop, [(c, "/api/v1/samples", node, token, "prod")
                                           for c, (node, token) in enumerate(tokens)], split)
    direct = Phase("in process", ingest_loop, [(w,) for w in range(args.workers)], split)
    baseline = Phase("DRF", post_loop, [(c, "/bench/drf-samples", f"base-{c}", "-", "base")
                                        for c in range(args.clients)], split)
    try:
        for turn in range(args.rounds):
            print(f"  round {turn + 1} of {args.rounds}", flush=True)
            order = [copy, product, direct][turn % 3:] + [copy, product, direct][:turn % 3]
            rates = {phase.name: phase.run(args.seconds / args.rounds) for phase in order}
            raw = max(rates["raw COPY"], 1)
            print(f"    of raw COPY this round: product {rates['product'] / raw:.0%}, "
                  f"in process {rates['in process'] / raw:.0%}", flush=True)
        print("  DRF baseline (one turn: its margin is far beyond the drift)", flush=True)
        baseline.run(args.seconds)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    print("totals:")
    copy, product = copy.report(), product.report()
    direct, baseline = direct.report(), baseline.report()
    print(f"  product / raw COPY:    {product['rate'] / copy['rate']:.0%} (target >= 60%)")
    print(f"  in process / raw COPY: {direct['rate'] / copy['rate']:.0%} "
          "(the same ingestion without HTTP)")
    print(f"  product / DRF:         {product['rate'] / baseline['rate']:.1f}x (target >= 4x)")
    kept = args.trigger == "product"
    print(f"  rollups: {rollups_exact() if kept else f'not kept (--trigger {args.trigger})'}")
    print(f"  raw samples on disk, as written: {bytes_per_sample()}")
    settle_partitions()
    print(f"  raw samples on disk, each day settled: {bytes_per_sample()} "
          "(target <= 120 bytes with indexes)")


def replace_trigger(kind: str) -> None:
    """The experiment of --trigger, on the bench's database only: the trigger's function
    ends where its part at CUT_AT[kind] begins (its declarations stay)."""
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        function = conn.execute(
            "SELECT pg_get_functiondef('metering_add_rollups'::regproc)").fetchone()[0]
        if CUT_AT[kind] not in function:
            raise SystemExit(f"--trigger {kind}: the trigger's function has no "
                             f"{CUT_AT[kind].strip()!r} to cut at; update bench/ingest.py")
        conn.execute(function[:function.index(CUT_AT[kind])]
                     + "    RETURN NULL;\nEND;\n$function$")
    print(f"  EXPERIMENT: the rollup trigger is {kind} (--trigger {kind}); the rollups are not "
          "kept", flush=True)


def settle_partitions() -> None:
    """What the daily retention job does to each finished day (metering.partitions.settle)."""
    from metering import partitions

    with psycopg.connect(DATABASE_URL) as conn:
        days = [row[0] for row in conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'metering_usagesample'::regclass AND c.relname LIKE %s",
            ["metering_usagesample_p%"])]
    for name in days:
        partitions.settle(datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m%d").date())


def bytes_per_sample() -> str:
    """The sample table's partitions, heap and indexes, over the samples they hold."""
    query = """
    SELECT sum(pg_total_relation_size(c.oid)), sum(pg_relation_size(c.oid)),
           (SELECT count(*) FROM metering_usagesample)
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'metering_usagesample'::regclass
    """
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute("VACUUM metering_usagesample")
        total, heap, rows = conn.execute(query).fetchone()
    return (f"{total / rows:.0f} bytes a sample ({heap / rows:.0f} heap, "
            f"{(total - heap) / rows:.0f} indexes and maps) over {rows:,} samples")


if __name__ == "__main__":
    main()
