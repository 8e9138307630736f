"""The rollup trigger's cost: PostgreSQL CPU a batch over the same COPY with the trigger off.

    .venv/bin/python bench/trigger.py [--batches 500] [--rounds 5]

Needs PostgreSQL on this machine (its backend's CPU time is read from /proc) as a superuser
(BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/gpuloans_trigger_bench; dropped
and created afresh). One connection COPYs the product's 500-sample batches (50 GPUs, ten
minutes of one-minute samples on the agent's grid, as metering.intake.store_postgresql writes
them) forward in time, in turns: the trigger off (session_replication_role = replica, the
baseline), then the trigger of migration metering 0011 (before 0014) and the trigger as
migrated, in an order that swaps each round. Prints each round's extra CPU a batch of both
triggers over the baseline and their medians. No target: the figure says where the endpoint's
database time goes (bench/ingest.py).
"""

import argparse
import statistics
import sys
from datetime import UTC, datetime, timedelta
from importlib import import_module
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import cpu  # noqa: E402
from bench.common import database_url, in_process, recreate_database, without_rollups  # noqa: E402

DATABASE_URL = database_url("gpuloans_trigger_bench")
in_process(DATABASE_URL)
GPUS, STEPS = 50, 10  # a batch: 50 GPUs, ten one-minute samples each
START = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=60)


def prepare() -> list[int]:
    """The schema, a tenant, a node with its GPUs and partitions for the days ahead."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from loans.models import Tenant
    from metering.models import Gpu, Node
    from metering.partitions import ensure_partitions

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    node = Node.objects.create(name="bench", default_tenant=tenant, max_devices=GPUS)
    gpus = [Gpu.objects.create(uuid=f"GPU-bench-{k:03d}", node=node, index=k % 8)
            for k in range(GPUS)]
    ensure_partitions({(START + timedelta(days=d)).date() for d in range(62)})
    return [gpu.pk for gpu in gpus]


def batch(gpus: list[int], tenant: int, start: datetime) -> bytes:
    from metering.intake import copy_binary
    from metering.intake.store_postgresql import TYPES

    rows = [(gpu, start + timedelta(minutes=step), tenant, 1 + k % 7, 60, k % 5 != 0, 1.0,
             float(k), 40000 + k, 350.5, 60, False)
            for step in range(STEPS) for k, gpu in enumerate(gpus)]
    return copy_binary.rows(list(zip(*rows, strict=True)), TYPES)


def turn(conn: psycopg.Connection, gpus: list[int], tenant: int, start: datetime,
         batches: int) -> tuple[float, datetime]:
    """Backend CPU ms a batch over `batches` batches from `start`, and where they ended."""
    from metering.intake.store_postgresql import COPY

    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    data = [batch(gpus, tenant, start + timedelta(minutes=STEPS * b)) for b in range(batches)]
    before = cpu.process_seconds(backend)
    for payload in data:
        with conn.cursor().copy(COPY) as copy:
            copy.write(payload)
    return ((cpu.process_seconds(backend) - before) / batches * 1000,
            start + timedelta(minutes=STEPS * batches))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.batches * args.rounds * 3 * STEPS > 60 * 24 * 60:
        raise SystemExit("that many batches run past the 60 days of partitions; ask for fewer")
    recreate_database(DATABASE_URL)
    gpus = prepare()
    if cpu.postmaster(DATABASE_URL) is None:
        raise SystemExit("PostgreSQL runs elsewhere: its backend's CPU cannot be read here")
    before = import_module("metering.migrations.0011_holder_unknown").FUNCTION
    after = import_module("metering.migrations.0014_leaner_rollup_trigger").FUNCTION
    extra: dict[str, list[float]] = {"0011": [], "0014": []}
    start = START
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        tenant = conn.execute("SELECT id FROM loans_tenant").fetchone()[0]
        print(f"{args.rounds} rounds of {args.batches} batches of {GPUS * STEPS} samples a "
              "turn; PostgreSQL CPU ms a batch over the COPY with the trigger off:", flush=True)
        for k in range(args.rounds):
            without_rollups(conn.execute)
            off, start = turn(conn, gpus, tenant, start, args.batches)
            conn.execute("SET session_replication_role = origin")
            triggers = [("0011", before), ("0014", after)]
            for name, function in triggers if k % 2 == 0 else triggers[::-1]:
                conn.execute(function)
                cost, start = turn(conn, gpus, tenant, start, args.batches)
                extra[name].append(cost - off)
            print(f"  round {k + 1}: trigger off {off:.2f}, 0011 +{extra['0011'][-1]:.2f}, "
                  f"0014 +{extra['0014'][-1]:.2f}", flush=True)
        conn.execute(after)  # the database as migrated
    old, new = (statistics.median(extra[name]) for name in ("0011", "0014"))
    print(f"medians: migration 0011's trigger +{old:.2f} ms a batch, 0014's +{new:.2f} ms "
          f"({new / old:.0%} of it)")


if __name__ == "__main__":
    main()
