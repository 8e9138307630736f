"""What a refused batch costs: 5,000 made-up devices from a node past its device limit.

    .venv/bin/python bench/refusal.py [--devices 5000] [--rounds 20]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
gpuloans_refusal_bench; dropped and created afresh). A node allowed 8 physical GPUs reports
its 8 for an hour, then posts batches of --devices samples of devices it never reported, each
batch new devices (a fresh process cache each time, as a new attacker's batch would meet), to
POST /api/v1/samples in process (Django's test client: the view, the checks, the database;
no HTTP server). Before the meter counted physical GPUs per hour such a batch cost a query a
device, 11 to 26 s. Prints the p50 and worst answer time and the queries a batch. Target:
under 100 ms.
"""

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import database_url, in_process, recreate_database  # noqa: E402

DATABASE_URL = database_url("gpuloans_refusal_bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    recreate_database(DATABASE_URL)
    in_process(DATABASE_URL)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from loans.models import Tenant
    from metering.intake.ingest import forget_gpus
    from metering.models import DeviceRefusal, Node, UsageSample

    call_command("migrate", verbosity=0)
    settings.INGEST_REQUESTS_PER_MINUTE = 0
    tenant = Tenant.objects.create(slug="bench", name="Bench")
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    # Registered before the hours it sends (intake takes a node's samples from then on).
    node = Node.objects.create(name="bench-01", default_tenant=tenant, max_devices=8,
                               created_at=start - timedelta(hours=1))
    token = node.issue_token()
    client = Client()

    def post(samples: list[dict]) -> dict:
        body = json.dumps({"node": node.name, "samples": samples})
        return client.post("/api/v1/samples", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}").json()

    def sample(uuid: str, k: int) -> dict:
        return {"gpu_uuid": uuid, "ts": (start + timedelta(minutes=k)).isoformat(),
                "interval_s": 60, "allocated": True, "fraction": 1.0}

    own = post([sample(f"GPU-own-{g}", k) for g in range(8) for k in range(60)])
    assert own["accepted"] == 480, own
    times, queries = [], []
    for round_ in range(args.rounds):
        forget_gpus()
        batch = [sample(f"FAKE-{round_}-{d}", d % 60) for d in range(args.devices)]
        with CaptureQueriesContext(connection) as seen:
            began = time.perf_counter()
            answer = post(batch)
            times.append(time.perf_counter() - began)
        assert answer["accepted"] == 0 and len(answer["rejected"]) == args.devices, answer
        queries.append(len(seen))
    stored = UsageSample.objects.count()
    refusal = DeviceRefusal.objects.get()
    print(f"refused batches of {args.devices:,} made-up devices, {args.rounds} rounds")
    print(f"  answer p50 {statistics.median(times) * 1000:.1f} ms, "
          f"worst {max(times) * 1000:.1f} ms (target: under 100 ms)")
    print(f"  queries a batch: {min(queries)} to {max(queries)}; samples stored: {stored} "
          f"(the node's own); refusal rows: 1 ({refusal.samples:,} samples counted)")


if __name__ == "__main__":
    main()
