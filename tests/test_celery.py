"""Jobs run on Celery: on Redis in production, on the embedded broker by default."""

import os
import re
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.db import connection

from metering.models import Gpu, Node, TenantHour, UsageSample
from tests.helpers import redis_url

ROOT = Path(__file__).resolve().parent.parent
REDIS_URL = os.environ.get("TEST_REDIS_URL") or redis_url(15)
T0 = datetime(2026, 11, 29, 10, tzinfo=UTC)


def database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.mark.postgresql
def test_a_job_sent_through_redis_runs_on_a_worker_against_the_database(transactional_db, tenant):
    node = Node.objects.create(name="gpu-node-01", default_tenant=tenant)
    gpu = Gpu.objects.create(uuid="GPU-1", node=node, index=0)
    for minute in range(30):
        UsageSample.objects.create(gpu=gpu, ts=T0 + timedelta(minutes=minute),
                                   tenant=tenant, interval_s=60, allocated=True, util_pct=50.0)
    queue = f"gpuloans-test-{uuid.uuid4().hex}"
    env = {**os.environ, "CELERY_BROKER_URL": REDIS_URL, "CELERY_RESULT_BACKEND": REDIS_URL,
           "DATABASE_URL": database_url()}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "-Q", queue,
         "--loglevel=WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    client = Celery("probe", broker=REDIS_URL, backend=REDIS_URL)
    try:
        result = client.send_task("metering.tasks.recount_rollups", queue=queue,
                                  args=[T0.isoformat(), (T0 + timedelta(hours=1)).isoformat()])
        assert result.get(timeout=60) == 30
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=30)
    hour = TenantHour.objects.get(tenant=tenant, hour=T0)
    assert hour.allocated_gpu_s == 30 * 60, output
    assert hour.busy_gpu_s == 30 * 30


def test_the_embedded_broker_carries_a_job_between_processes_with_no_server(tmp_path):
    """A job queued by one process is run by a worker in another, through files only."""
    env = {**os.environ, "GPULOANS_VAR_DIR": str(tmp_path), "CELERY_BROKER_URL": "filesystem://",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    env.pop("CELERY_RESULT_BACKEND", None)

    def shell(code: str) -> str:
        command = [sys.executable, "manage.py", "shell", "--no-imports", "-c", code]
        return subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=120,
                              capture_output=True, text=True).stdout

    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    shell(
        "from metering.models import *; from datetime import datetime, UTC; "
        "node = Node.objects.create(name='n1'); gpu = Gpu.objects.create(uuid='G', node=node); "
        "UsageSample.objects.create(gpu=gpu, ts=datetime(2026, 11, 29, 10, tzinfo=UTC),"
        " interval_s=60, allocated=True); "
        "from metering.tasks import recount_rollups; "
        "recount_rollups.delay('2026-11-29T10:00:00+00:00', '2026-11-29T11:00:00+00:00')"
    )
    assert len(list((tmp_path / "celery-broker" / "queue").iterdir())) == 1
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    count = "from metering.models import TenantHour; print(TenantHour.objects.count())"
    try:
        deadline = time.monotonic() + 60
        while shell(count).strip() != "1" and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=30)
    assert shell(count).strip() == "1", output
    assert list((tmp_path / "celery-broker" / "queue").iterdir()) == []
    # The worker logs as the web tier does (settings.LOGGING): UTC times, not its own format
    # in the process's local zone.
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO celery\.apps\.worker \[-\] "
                     r"celery@\S+ ready", output, re.MULTILINE), output


def test_a_settings_module_built_on_the_projects_loads_and_beat_reads_its_periods():
    """bench.settings imports config.settings; the beat schedule read a setting while config
    was imported, so such a module was read half-built (the ingestion bench failed)."""
    code = ("import django; django.setup(); from config.celery import app; "
            "app.loader.import_default_modules(); "
            "print(app.conf.beat_schedule['list-kubernetes']['schedule'])")
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "bench.settings",
           "KUBERNETES_LIST_SECONDS": "30"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "30.0"
