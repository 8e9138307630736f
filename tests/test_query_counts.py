"""How many queries each page, admin list and API list runs, against baselines stored beside
the tests (query_counts.json). A change that adds a query fails here until the baseline is
updated on purpose (GPULOANS_UPDATE_QUERY_COUNTS=1 rewrites the file; review its diff); one
that saves queries fails too, so the baseline stays tight. The pages that list contracts are
also measured at two sizes: their count must not grow with the number of rows."""

import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.contrib import admin
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from loans.models import Contract, SharingGroup, SharingMember, Tenant
from loans.services.ledger.closing import close_due_periods
from metering.models import Gpu, Node, UsageSample
from metering.models.nodes import default_cluster
from metering.recount import rebuild_rollups

BASELINES = Path(__file__).with_name("query_counts.json")
UPDATE = os.environ.get("GPULOANS_UPDATE_QUERY_COUNTS") == "1"
MONTH_12 = datetime(2027, 10, 5, 4, tzinfo=UTC)  # period 12 of a contract from 2026-11-01
API_LISTS = ["tenant-list", "plan-list", "contract-list", "cluster-list", "node-list",
             "reattribution-list", "burst-list"]


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(captured.captured_queries)


def contracts(plan, count: int) -> None:
    """Active contracts of tenants of their own, up to `count` in all."""
    have = Contract.objects.count()
    for k in range(have, count):
        tenant = Tenant.objects.create(slug=f"team-{k:03d}", name=f"Team {k}")
        Contract.objects.create(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1),
                                time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)


def metered(tenant, hours: int) -> None:
    node = Node.objects.create(name="gpu-node-01", default_tenant=tenant)
    gpu = Gpu.objects.create(uuid="GPU-aaaa", node=node, index=0, model="NVIDIA H100 80GB HBM3")
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    UsageSample.objects.bulk_create(
        UsageSample(gpu=gpu, ts=end - timedelta(hours=h + 1), tenant=tenant, interval_s=3600,
                    allocated=True, util_pct=40.0) for h in range(hours))
    rebuild_rollups(end - timedelta(hours=hours), end)


@pytest.fixture
def measured():
    """Counts this module measured, compared with (or written to) the baselines at its end."""
    counts: dict[str, int] = {}
    yield counts
    everything = json.loads(BASELINES.read_text()) if BASELINES.exists() else {}
    stored = everything.get(connection.vendor, {})  # the two databases differ a little
    if UPDATE:
        everything[connection.vendor] = {**stored, **counts}
        BASELINES.write_text(json.dumps(everything, indent=2, sort_keys=True) + "\n")
        return
    differ = {name: (stored.get(name), n) for name, n in counts.items() if stored.get(name) != n}
    assert differ == {}, f"query counts (baseline, now) changed: {differ}; if on purpose, " \
                         "rerun with GPULOANS_UPDATE_QUERY_COUNTS=1"


def test_the_tenant_page_at_month_12(client, lead, contract, measured):
    with time_machine.travel(MONTH_12, tick=False):
        metered(contract.tenant, 24 * 30)
        close_due_periods(datetime.now(UTC))
        assert contract.statements.count() == 11
        client.force_login(lead)
        measured["tenant page, month 12"] = queries(client, "/en/tenants/vision/")
        measured["tenant periods.csv, month 12"] = queries(
            client, "/en/tenants/vision/periods.csv")


def grouped_close_queries(plan, groups: int, members: int) -> tuple[int, int]:
    """The queries and statements of the first close of `groups` sharing groups of `members`
    contracts each, 11 periods due each (rolled back afterwards); on SQLite, the queries other
    than INSERTs."""
    with transaction.atomic():
        contracts(plan, groups * members)
        made = [SharingGroup.objects.create(name=f"org-{k}", currency="CNY")
                for k in range(groups)]
        for k, contract in enumerate(Contract.objects.order_by("pk")):
            SharingMember.objects.create(group=made[k % groups], contract=contract,
                                         joins_at=contract.periods()[0].start)
        with CaptureQueriesContext(connection) as captured:
            written = len(close_due_periods(datetime.now(UTC)).written)
        transaction.set_rollback(True)
    # SQLite binds at most 999 values a statement: Django splits its INSERTs to fit.
    reads = [q for q in captured.captured_queries if not q["sql"].startswith("INSERT")]
    return (len(captured.captured_queries) if connection.vendor == "postgresql" else len(reads),
            written)


def test_the_close_reads_and_writes_a_group_at_once(plan, measured):
    """The close's queries grow with the sharing groups, not with their members."""
    with time_machine.travel(MONTH_12, tick=False):
        counts = {members: grouped_close_queries(plan, 2, members) for members in (2, 5)}
    assert counts[2][1] == 2 * 2 * 11 and counts[5][1] == 2 * 5 * 11, counts
    assert counts[2][0] == counts[5][0], counts
    measured["close, 2 groups"] = counts[2][0]


def test_the_fleet_page_does_not_grow_with_contracts(client, operator, plan, contract, measured):
    with time_machine.travel(datetime(2026, 12, 10, tzinfo=UTC), tick=False):
        metered(contract.tenant, 48)
        client.force_login(operator)
        counts = {}
        for size in (20, 200):
            contracts(plan, size)
            counts[size] = (queries(client, "/en/fleet/"), queries(client, "/en/fleet.csv"),
                            queries(client, reverse("admin:loans_contract_changelist")))
        assert counts[20] == counts[200], counts
        measured["fleet page"], measured["fleet.csv"], measured["admin contract list"] = counts[20]


def test_every_admin_list(client, operator, contract, measured):
    with time_machine.travel(datetime(2026, 12, 10, tzinfo=UTC), tick=False):
        metered(contract.tenant, 48)
        client.force_login(operator)
        for model in admin.site._registry:
            meta = model._meta
            url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
            measured[f"admin {meta.app_label}.{meta.model_name} list"] = queries(client, url)
        measured["admin usage sample list"] = queries(
            client, reverse("admin:metering_usagesample_changelist"))


def test_every_api_list_does_not_grow_with_rows(client, operator, plan, contract, measured):
    # The default cluster, as migrations leave it (a test that flushed the database before
    # this one in the same process took it away, and an empty list reads one query less).
    default_cluster()
    with time_machine.travel(datetime(2026, 12, 10, tzinfo=UTC), tick=False):
        client.force_login(operator)
        counts = {}
        for size in (2, 12):
            contracts(plan, size)
            counts[size] = [queries(client, reverse(name)) for name in API_LISTS]
        assert counts[2] == counts[12], counts
        for name, count in zip(API_LISTS, counts[2], strict=True):
            measured[f"api {name}"] = count
