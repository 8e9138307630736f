"""Migration metering 0009 on a database with samples in the old row: every sample is kept
with its readings and owner, rollups stay as they were, devices get their covered span and
their first tenure reaches back to the start of time, and the new trigger refuses an overlap.

Each database is migrated for real, in its own process: to 0008 first, samples written in the
old row by the historical models, then to the latest migrations."""

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from metering import partitions

OLD = [("metering", "0008_devices")]
executor = MigrationExecutor(connection)
executor.migrate(OLD)
old = executor.loader.project_state(OLD).apps
Node, Gpu, GpuTenure = (old.get_model("metering", m) for m in ("Node", "Gpu", "GpuTenure"))
UsageSample, TenantHour = old.get_model("metering", "UsageSample"), old.get_model(
    "metering", "TenantHour")
Tenant = old.get_model("loans", "Tenant")

tenant = Tenant.objects.create(slug="vision", name="Vision")
cluster = old.get_model("metering", "Cluster").objects.get()
node = Node.objects.create(name="n1", cluster=cluster)
first_seen = datetime(2026, 11, 20, tzinfo=UTC)
gpus = [Gpu.objects.create(uuid=f"GPU-{i}", node=node, index=i, parent=f"GPU-{i}",
                           first_seen_at=first_seen) for i in range(2)]
for gpu in gpus:
    GpuTenure.objects.create(gpu=gpu, node=node, since=first_seen)
base = (datetime.now(UTC) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
partitions.ensure_partitions({base.date()})
for gpu in gpus:
    for k in range(90):  # 10:00 to 11:30, a minute each: an hour and a half
        UsageSample.objects.create(
            gpu=gpu, ts=base + timedelta(minutes=k), node=node, tenant=tenant, interval_s=60,
            allocated=True, fraction=1.0, util_pct=12.5, mem_used_mib=1000, power_w=300.25,
            temp_c=55, owner={"namespace": "vision", "pod": f"train-{gpu.index}"})
before = sorted(TenantHour.objects.values_list("hour", "allocated_gpu_s", "busy_gpu_s",
                                               "sample_count"))
if connection.vendor == "sqlite":  # the old ingestion path summed them in Python
    for hour, gpu_s, count in ((base, 7200.0, 120), (base + timedelta(hours=1), 3600.0, 60)):
        TenantHour.objects.create(tenant=tenant, hour=hour, allocated_gpu_s=gpu_s,
                                  busy_gpu_s=gpu_s / 8, sample_count=count, peak_gpus=2.0,
                                  reported_s=gpu_s)
    before = sorted(TenantHour.objects.values_list("hour", "allocated_gpu_s", "busy_gpu_s",
                                                   "sample_count"))
assert before == [(base, 7200.0, 900.0, 120), (base + timedelta(hours=1), 3600.0, 450.0, 60)], (
    before)

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())

from metering.models import Gpu, GpuTenure, Owner, TenantHour, UsageSample  # noqa: E402
from metering.models import TENURE_START  # noqa: E402

assert UsageSample.objects.count() == 180
assert set(UsageSample.objects.values_list("util_pct", "power_w", "mem_used_mib")) == {
    (12.5, 300.25, 1000)}
assert sorted(Owner.objects.values_list("namespace", "pod")) == [
    ("vision", "train-0"), ("vision", "train-1")]
assert UsageSample.objects.filter(owner__pod="train-1").count() == 90
after = sorted(TenantHour.objects.values_list("hour", "allocated_gpu_s", "busy_gpu_s",
                                              "sample_count"))
assert after == before, (after, before)
assert set(Gpu.objects.values_list("covered_from", "covered_until")) == {
    (base, base + timedelta(minutes=90))}
assert set(GpuTenure.objects.values_list("since", flat=True)) == {TENURE_START}

import json  # noqa: E402

from django.test import Client  # noqa: E402

from metering.models import Node  # noqa: E402

token = Node.objects.get().issue_token()


def post(ts):
    sample = {"gpu_uuid": "GPU-0", "gpu_index": 0, "ts": ts.isoformat(), "interval_s": 60,
              "allocated": True, "owner": {"namespace": "vision"}}
    return Client(HTTP_HOST="localhost").post(
        "/api/v1/samples", json.dumps({"node": "n1", "samples": [sample]}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}").json()


inside = post(base + timedelta(minutes=30, seconds=30))
assert inside["accepted"] == 0 and inside["rejected"][0]["error"].startswith("overlap"), inside
assert post(base + timedelta(minutes=90))["accepted"] == 1
print("migrated")
'''


def migrate_and_check(database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", SCRIPT], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "migrated" in result.stdout, result.stderr[-3000:]


@pytest.mark.postgresql
def test_the_migration_keeps_every_sample_on_postgresql():
    url = os.environ["DATABASE_URL"]
    name = "gpuloans_migration_check"
    server = url.rsplit("/", 1)[0]
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate_and_check(f"{server}/{name}")
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_migration_keeps_every_sample_on_sqlite(tmp_path):
    migrate_and_check(f"sqlite:///{tmp_path / 'old.sqlite3'}")
