"""The jobs over many contracts, each tenant with a year of hourly rollups.

    .venv/bin/python bench/jobs.py [--contracts 1000] [--days 365] [--groups 100]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
gpuloans_jobs_bench; dropped and created afresh). Generates the tenant-hour rollups in the
database (a working-day rhythm, noise and a per-tenant level), then times one run of the
recommendation job (`python manage.py recommend`'s service) over every contract, then a second
run (which updates instead of creating), then the alert job, then the first period close of the
year-old fleet (every contract has 11 periods due). To show that the close is linear in
periods, the statements are then forgotten and the same fleet is closed as it stood half a year
in (6 periods due each): the time per statement of both first closes is printed, and their
ratio (the close before this change took one query per earlier statement for every statement,
so its time per statement grew with the periods due). With `--groups N` (default 100) the
contracts are dealt into N sharing groups from their first period, so the close states each
group's periods together (lent and borrowed lines, group statements) and the recommendation
job prices each grouped contract on its group's pooled usage; `--groups 0` is the fleet
without groups.
Targets: the recommendation job under 30 s and the first close under 10 s, for 1,000
contracts in 100 groups.
"""

import argparse
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import database_url, in_process, recreate_database  # noqa: E402

DATABASE_URL = database_url("gpuloans_jobs_bench")
in_process(DATABASE_URL)


def timed(label: str, function):
    started = time.perf_counter()
    result = function()
    print(f"  {label}: {time.perf_counter() - started:.1f} s  {result}", flush=True)
    return time.perf_counter() - started


def load(contracts: int, days: int, now) -> None:
    from django.db import connection

    from loans.maths.billing import add_months
    from loans.models import Contract, Plan, Tenant

    plans = [Plan.objects.create(
        name=f"H100 {base}", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=base,
        max_quota_gpus=base * 2, committed_gpu_hours=base * 500, committed_rate=Decimal(18),
        term_months=12, currency="CNY") for base in (4, 8, 16, 32)]
    tenants = Tenant.objects.bulk_create(
        Tenant(slug=f"team-{k:04d}", name=f"Team {k}") for k in range(contracts))
    starts_on = add_months(now.date(), -11) - timedelta(days=15)
    signed = [Contract(tenant=t, plan=plans[k % len(plans)], starts_on=starts_on,
                       time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
              for k, t in enumerate(tenants)]
    for contract in signed:  # what save() does, for bulk_create
        contract.sign(now)
        contract._place()
    Contract.objects.bulk_create(signed)
    end = now.replace(minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.17)")
        cursor.execute("""
            INSERT INTO metering_tenanthour (tenant_id, hour, allocated_gpu_s, busy_gpu_s,
                                             sample_count, peak_gpus, reported_s)
            SELECT t.id, h, g * 3600, g * 3600 * 0.6, 1, g, g * 3600
            FROM loans_tenant t
            CROSS JOIN generate_series(%(first)s::timestamptz, %(last)s::timestamptz,
                                       '1 hour') h
            CROSS JOIN LATERAL (SELECT greatest(0, round(
                (2 + t.id %% 14) * (0.7 + 0.5 * (extract(hour FROM h) BETWEEN 1 AND 13)::int)
                * (0.8 + 0.4 * random()))) AS g) AS held
        """, {"first": end - timedelta(days=days), "last": end - timedelta(hours=1)})
        rows = cursor.rowcount
        cursor.execute("VACUUM ANALYZE")
    print(f"  {contracts} contracts, {rows:,} tenant-hours", flush=True)


def share(groups: int) -> None:
    """Deal the contracts into `groups` sharing groups, each from its first period."""
    from loans.models import Contract, SharingGroup, SharingMember

    if not groups:
        return
    made = SharingGroup.objects.bulk_create(
        SharingGroup(name=f"org-{k:03d}", currency="CNY") for k in range(groups))
    contracts = list(Contract.objects.order_by("pk"))
    SharingMember.objects.bulk_create(
        SharingMember(group=made[k % groups], contract=c, joins_at=c.periods()[0].start)
        for k, c in enumerate(contracts))
    print(f"  {groups} sharing groups of {len(contracts) // groups} contracts", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contracts", type=int, default=1000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--groups", type=int, default=100)
    args = parser.parse_args()
    print(f"database {DATABASE_URL}", flush=True)
    recreate_database(DATABASE_URL)

    import django
    from django.core.management import call_command
    from django.utils import timezone

    django.setup()
    from loans.services.advice.standalone import refresh_recommendations
    from loans.services.alerts.conditions import evaluate_alerts
    from loans.services.ledger.closing import close_due_periods

    call_command("migrate", verbosity=0)
    now = timezone.now()
    timed("load", lambda: load(args.contracts, args.days, now))
    share(args.groups)

    def summary(run):
        return (f"{run.contracts} contracts: {run.created} created, {run.updated} updated, "
                f"{run.superseded} superseded")

    first = timed("recommend, first run", lambda: summary(refresh_recommendations(now)))
    timed("recommend, second run", lambda: summary(refresh_recommendations(now)))
    timed("alerts", lambda: (lambda r: f"{len(r.opened)} opened")(evaluate_alerts(now)))
    closed: list = []
    close = timed("period close, first of the year-old fleet",
                  lambda: f"{closed.append(len(close_due_periods(now).written)) or closed[-1]} "
                          "statements")
    year = close / closed[0]
    count, seconds = first_close_half_a_year_in()
    half = seconds / count
    print(f"first close per statement: {half * 1000:.2f} ms with 6 periods due a contract "
          f"({count:,} statements), {year * 1000:.2f} ms with 11 ({closed[0]:,}): ratio "
          f"{year / half:.2f} (1.0 is linear in periods)")
    grouped = f" in {args.groups} sharing groups" if args.groups else " without groups"
    print(f"target: recommendation job {first:.1f} s for {args.contracts} contracts{grouped} "
          "(target < 30 s)")
    print(f"target: first period close {close:.1f} s for {closed[0]:,} statements of "
          f"{args.contracts} contracts{grouped} (target < 10 s)")


def first_close_half_a_year_in() -> tuple[int, float]:
    """Forget every statement, then close the fleet as of half a year in: (statements,
    seconds)."""
    from django.db import connection

    from loans.models import Contract
    from loans.services.ledger.closing import close_due_periods

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM loans_correctionline")
        cursor.execute("DELETE FROM loans_sharingline")
        cursor.execute("DELETE FROM loans_groupstatement_member_statements")
        cursor.execute("DELETE FROM loans_groupstatement")
        cursor.execute("DELETE FROM loans_statement")
        cursor.execute("VACUUM ANALYZE loans_statement")
    Contract.objects.update(status=Contract.Status.ACTIVE)
    middle = Contract.objects.first().periods()[5].end + timedelta(hours=3)  # 6 periods due
    started = time.perf_counter()
    written = len(close_due_periods(middle).written)
    return written, time.perf_counter() - started


if __name__ == "__main__":
    main()
