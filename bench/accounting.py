"""Slurm's accounting pass with the floor's waits (metering.schedulers.slurm.accounting): one
pass over a month of jobs of 1,000 accounts, as `sacct --json` gives them, then the same pass
again (every job read again, nothing changed).

    .venv/bin/python bench/accounting.py [--accounts 1000] [--jobs 10000 100000]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
gpuloans_accounting_bench; dropped and created afresh for each size). Two jobs in three wait
before they start (for room, 1 to 120 minutes), one in twenty is cancelled while waiting, one
in fifty still waits; each asks for 1 to 8 GPUs and runs up to six hours. sacct is not run: its
answer is made here and handed to the pass as sacct would (the reader parses it, as it would
the real one). Prints each size's seconds, its seconds a thousand jobs, and the ratio of the
largest to the smallest per job (1.0 is linear).
Target: under 60 s for 100,000 jobs of 1,000 accounts, and linear from 10,000.
"""

import argparse
import json
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import database_url, in_process, recreate_database  # noqa: E402

DATABASE_URL = database_url("gpuloans_accounting_bench")
in_process(DATABASE_URL)
NOW = datetime(2026, 12, 1, tzinfo=UTC)
MONTH = timedelta(days=30)


def sacct_answer(jobs: int, accounts: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    out = []
    for k in range(jobs):
        submitted = NOW - MONTH + timedelta(seconds=rng.randrange(int(MONTH.total_seconds())))
        waits = rng.random() < 2 / 3
        start = submitted + timedelta(minutes=rng.randint(1, 120)) if waits else submitted
        kind = rng.random()
        gpus = rng.randint(1, 8)
        if kind < 0.05 and waits:  # cancelled while it waited
            start_s, end_s, state = 0, int(start.timestamp()), "CANCELLED"
        elif kind < 0.07:  # still waiting
            start_s, end_s, state = 0, 0, "PENDING"
        else:
            end = min(start + timedelta(minutes=rng.randint(5, 360)), NOW)
            start_s = int(min(start, NOW).timestamp())
            end_s, state = (int(end.timestamp()), "COMPLETED") if end < NOW else (0, "RUNNING")
        tres = [{"type": "cpu", "name": None, "count": 4},
                {"type": "gres", "name": "gpu", "count": gpus}]
        out.append({
            "job_id": 100000 + k, "account": f"team-{k % accounts:04d}", "user": "alice",
            "qos": "normal", "array": {"job_id": 0, "task_id": None},
            "state": {"current": state, "reason": "Priority" if state == "PENDING" else "None"},
            "time": {"submission": int(submitted.timestamp()),
                     "eligible": int(submitted.timestamp()), "start": start_s, "end": end_s},
            "tres": {"requested": tres, "allocated": tres if start_s else []}})
    return json.dumps({"jobs": out})


def one_size(jobs: int, accounts: int) -> tuple[float, float]:
    import django
    from django.core.management import call_command
    from django.db import connections

    recreate_database(DATABASE_URL)
    connections.close_all()
    django.setup()
    call_command("migrate", verbosity=0)
    from loans.models import Tenant
    from metering.models import AttributionRule, Cluster, JobWait
    from metering.schedulers.slurm.accounting import import_usage

    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    tenants = Tenant.objects.bulk_create(
        Tenant(slug=f"team-{k:04d}", name=f"Team {k}") for k in range(accounts))
    AttributionRule.objects.bulk_create(
        AttributionRule(tenant=t, cluster=cluster, field="account", value=t.slug)
        for t in tenants)
    answer = sacct_answer(jobs, accounts)

    def run(command):
        return subprocess.CompletedProcess(command, 0, answer, "")

    times = []
    for _ in range(2):
        started = time.perf_counter()
        done = import_usage(cluster, now=NOW, since=NOW - MONTH, run=run)
        times.append(time.perf_counter() - started)
    print(f"{jobs:>7,} jobs of {accounts:,} accounts: first pass {times[0]:6.1f} s "
          f"({1000 * times[0] / jobs:.2f} s a thousand), again {times[1]:6.1f} s; "
          f"{done.read:,} held GPUs, {JobWait.objects.count():,} waits kept", flush=True)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--jobs", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    sizes = sorted(args.jobs)
    results = {n: one_size(n, args.accounts) for n in sizes}
    small, large = sizes[0], sizes[-1]
    per = [results[n][0] / n for n in (small, large)]
    print(f"per job, {large:,} against {small:,}: {per[1] / per[0]:.2f}x "
          f"(target: linear, about 1.0; and under 60 s for 100,000)")


if __name__ == "__main__":
    main()
