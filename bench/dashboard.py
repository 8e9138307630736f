"""The tenant page and the burn-down API, timed server-side on a big tenant, twice: with the
raw samples of the retention window, then with a raw sample table ten times larger.

    .venv/bin/python bench/dashboard.py [--requests 150] [--gpus 1000] [--days 365] [--fleet 1000]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
gpuloans_dash_bench; dropped and created afresh). Loads one tenant with a year-long contract and
--days of hourly rollups on --gpus GPUs (the GPU-hour and tenant-hour rows ingestion would
have written), plus hourly raw samples of every GPU for the retention window. Each page is
requested in-process through Django's test client with production settings (DEBUG=0), so the
figure is the server's own time per request: routing, session, queries, figures, charts and
template; the first request of each, with an empty cache, is shown apart ("cold"). Then nine
other GPUs' worth of raw samples per GPU go in beside them (same days, another tenant), and the
same requests are timed again. The pages read rollups only, so the
second run should be no slower; the target is p95 under 150 ms and at most 10% slower.
Last, --fleet more active contracts (a tenant each, 40 days of hourly usage) are added and the
operators' fleet page is timed the same way: p95 under 300 ms, and its query count the same as
with one contract.
"""

import argparse
import gc
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (  # noqa: E402
    database_url,
    in_process,
    recreate_database,
    without_rollups,
)

DATABASE_URL = database_url("gpuloans_dash_bench")
in_process(DATABASE_URL)
GPUS_PER_NODE = 8
RETENTION_DAYS = 35
ROUNDS = 5


def step(label: str):
    print(f"  {label} ...", end="", flush=True)
    started = time.perf_counter()
    return lambda: print(f" {time.perf_counter() - started:.1f} s", flush=True)


def load(gpus: int, days: int, now: datetime):
    """The tenant, its contract, GPUs, a year of rollups and the window's raw samples.
    Rollups are generated in the database, deterministically (setseed)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from loans.maths.billing import add_months
    from loans.models import Contract, Membership, Plan, Tenant
    from metering import partitions
    from metering.models import Gpu, Node

    done = step(f"tenant, contract and {gpus} GPUs")
    tenant = Tenant.objects.create(slug="big", name="Big Training Team")
    neighbour = Tenant.objects.create(slug="neighbours", name="Neighbours")
    plan = Plan.objects.create(
        name="H100 1000", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=gpus * 8 // 10,
        max_quota_gpus=gpus, committed_gpu_hours=gpus * 720 * 6 // 10, committed_rate=15,
        term_months=12, currency="CNY")
    # Twelve months whose last period is half gone: the page shows a live forecast. The rollups
    # reach back --days, before the contract too.
    starts_on = add_months(now.date(), -11) - timedelta(days=15)
    contract = Contract(tenant=tenant, plan=plan, starts_on=starts_on, time_zone="Asia/Shanghai",
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    lead = get_user_model().objects.create_user("lead", password="bench-password-42")
    Membership.objects.create(user=lead, tenant=tenant, role=Membership.Role.LEAD)
    for n in range(gpus // GPUS_PER_NODE):
        node = Node.objects.create(name=f"gpu-{n:04d}", default_tenant=tenant)
        Gpu.objects.bulk_create(
            Gpu(uuid=f"GPU-big-{n:04d}-{i}", node=node, index=i, model=plan.gpu_model)
            for i in range(GPUS_PER_NODE))
    done()

    first_hour = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    last_hour = now.replace(minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        done = step("GPU-hour rollups")
        cursor.execute("SELECT setseed(0.42)")
        # A GPU is held about 70% of the hours, more in working hours; busy 40-95% when held.
        cursor.execute("""
            INSERT INTO metering_gpuhour (gpu_id, tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                          sample_count, peak_gpus)
            SELECT g.id, %(tenant)s, h, 3600, 3600 * (0.40 + 0.55 * random()), 1, 1
            FROM generate_series(%(first)s::timestamptz, %(last)s::timestamptz, '1 hour') h
            CROSS JOIN metering_gpu g
            WHERE random() < 0.55 + 0.25 * (extract(hour FROM h) BETWEEN 1 AND 13)::int
        """, {"tenant": tenant.pk, "first": first_hour, "last": last_hour})
        rows = cursor.rowcount
        done()
        done = step(f"tenant-hour rollups from {rows:,} GPU-hours")
        cursor.execute("""
            INSERT INTO metering_tenanthour (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                             sample_count, peak_gpus)
            SELECT tenant_id, hour, sum(allocated_gpu_s), sum(busy_gpu_s), sum(sample_count),
                   count(*)
            FROM metering_gpuhour GROUP BY tenant_id, hour
        """)
        done()
    window = {(now - timedelta(days=k)).date() for k in range(RETENTION_DAYS + 1)}
    partitions.ensure_partitions(window)
    return contract, lead, neighbour, last_hour


def add_raw_samples(tenant_id: int, gpu_offset: int, copies: int, now_hour: datetime) -> int:
    """Hourly raw samples of every GPU for the retention window, `copies` times over under GPU
    ids offset past the real ones (the sample table has no foreign keys, as in production)."""
    from django.db import connection

    since = now_hour - timedelta(days=RETENTION_DAYS)
    with connection.cursor() as cursor:
        # Raw rows only: the rollups were generated apart, and these GPU ids are not real.
        without_rollups(cursor.execute)
        cursor.execute("""
            INSERT INTO metering_usagesample (gpu_id, ts, tenant_id, interval_s, allocated,
                fraction, util_pct, mem_used_mib, power_w, temp_c)
            SELECT g.id + %(offset)s + c * 100000, h, %(tenant)s, 3600, true, 1.0,
                   70.0, 60000, 600.0, 60
            FROM generate_series(%(since)s::timestamptz, %(last)s::timestamptz, '1 hour') h
            CROSS JOIN metering_gpu g CROSS JOIN generate_series(0, %(copies)s - 1) c
        """, {"offset": gpu_offset, "tenant": tenant_id, "since": since, "last": now_hour,
              "copies": copies})
        count = cursor.rowcount
        cursor.execute("RESET session_replication_role")
        cursor.execute("VACUUM ANALYZE")
    return count


def add_fleet(contracts: int, plan_id: int, now: datetime) -> int:
    """`contracts` more active contracts, a tenant each, with hourly usage since 40 days ago:
    what the fleet page reads for every one of them. Returns the tenant-hour rows added."""
    from django.db import connection

    from loans.maths.billing import add_months
    from loans.models import Contract, Tenant

    tenants = Tenant.objects.bulk_create(
        Tenant(slug=f"team-{k:04d}", name=f"Team {k}") for k in range(contracts))
    for k, tenant in enumerate(tenants):
        # Start days spread over the month, so the periods' bounds differ.
        starts_on = add_months(now.date(), -2) - timedelta(days=k % 28)
        Contract.objects.create(tenant=tenant, plan_id=plan_id, starts_on=starts_on,
                                time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    first = (now - timedelta(days=40)).replace(minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO metering_tenanthour (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                             sample_count, peak_gpus)
            SELECT t.id, h, 3600 * 4 * random(), 3600 * 2 * random(), 4, 4
            FROM generate_series(%(first)s::timestamptz, %(last)s::timestamptz, '1 hour') h
            CROSS JOIN loans_tenant t WHERE t.slug LIKE 'team-%%'
        """, {"first": first, "last": now.replace(minute=0, second=0, microsecond=0)})
        added = cursor.rowcount
        # As after the raw samples: the state autovacuum keeps a live table in (statistics,
        # and the visibility map an index-only scan needs), not a bulk load's first minute.
        cursor.execute("VACUUM ANALYZE")
        return added


def queries_of(client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


def time_requests(client, urls: dict[str, str], requests: int) -> dict[str, list[float]]:
    """The first request of each URL with an empty cache ("cold"), then `requests` of each in
    rounds that take the URLs in turn, so slow drifts of the machine fall on all of them."""
    from django.core.cache import cache

    out: dict[str, list[float]] = {}
    for name, url in urls.items():
        cache.clear()
        started = time.perf_counter()
        response = client.get(url)
        out[f"{name}, cold"] = [(time.perf_counter() - started) * 1000]
        assert response.status_code == 200, (url, response.status_code)
        for _ in range(5):
            client.get(url)
        out[name] = []
    gc.collect()
    for _round in range(ROUNDS):
        for name, url in urls.items():
            for _ in range(requests // ROUNDS):
                started = time.perf_counter()
                response = client.get(url)
                out[name].append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200
    return out


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[-1]


def report(label: str, timings: dict[str, list[float]]) -> None:
    print(f"\n{label}")
    print(f"  {'request':<32}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for name, times in timings.items():
        if len(times) == 1:
            print(f"  {name:<32}{times[0]:9.1f}")
            continue
        print(f"  {name:<32}{statistics.median(times):9.1f}{p95(times):9.1f}{max(times):9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--fleet", type=int, default=1000,
                        help="active contracts added for the fleet page (default 1000)")
    args = parser.parse_args()
    print(f"database {DATABASE_URL}; {args.gpus} GPUs, {args.days} days of rollups, "
          f"{args.requests} requests a page", flush=True)
    recreate_database(DATABASE_URL)

    import django
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client, override_settings
    from django.utils import timezone

    django.setup()
    from config.heap import settle

    settle()  # as the web workers do once the application is loaded (config/wsgi.py)
    done = step("migrate")
    call_command("migrate", verbosity=0)
    done()
    now = timezone.now()
    contract, lead, neighbour, now_hour = load(args.gpus, args.days, now)
    done = step("raw samples of the retention window")
    raw = add_raw_samples(contract.tenant_id, 0, 1, now_hour)
    done()

    client = Client()
    client.force_login(lead)
    urls = {
        "tenant page": "/en/tenants/big/",
        "burn-down API": f"/api/v1/contracts/{contract.pk}/burndown",
        "heatmap API (after the page)": f"/api/v1/contracts/{contract.pk}/heatmap",
        "whole-contract view": "/en/tenants/big/?period=all",
    }
    # Collected static files are a deployment step; plain storage spares the bench one.
    plain = {"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
             "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    with override_settings(STORAGES=plain):
        small = time_requests(client, urls, args.requests)
        report(f"raw sample table: {raw:,} rows", small)
        done = step("nine times more raw samples (another tenant's GPUs)")
        more = add_raw_samples(neighbour.pk, args.gpus * 10, 9, now_hour)
        done()
        large = time_requests(client, urls, args.requests)
        report(f"raw sample table: {raw + more:,} rows ({(raw + more) / raw:.0f}x)", large)

        operator = get_user_model().objects.create_superuser("operator", password="bench-42")
        ops = Client()
        ops.force_login(operator)
        few = queries_of(ops, "/en/fleet/")
        done = step(f"a fleet of {args.fleet:,} more active contracts with 40 days of usage")
        rows = add_fleet(args.fleet, contract.plan_id, now)
        done()
        fleet = time_requests(ops, {"fleet page": "/en/fleet/"}, max(args.requests // 5, 20))
        report(f"fleet page: {args.fleet + 1:,} active contracts, {rows:,} tenant-hours", fleet)
        many = queries_of(ops, "/en/fleet/")
        print(f"  queries: {few} with one contract, {many} with {args.fleet + 1:,}")

    print("\ntargets")
    for name in ("tenant page", "burn-down API"):
        before, after = p95(small[name]), p95(large[name])
        print(f"  {name}: p95 {before:.1f} ms then {after:.1f} ms (target < 150 ms); "
              f"10x raw samples: {after / before - 1:+.0%} (target <= +10%)")
    print(f"  fleet page, {args.fleet + 1:,} contracts: p95 {p95(fleet['fleet page']):.1f} ms "
          f"(target < 300 ms), {many} queries (constant: {few} with one contract)")


if __name__ == "__main__":
    main()
