"""The Celery broker stopped: ingestion and pages keep working, a job asked for meanwhile
waits in the database, and reaches the broker once it is back."""

import json
import shutil
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import redis
from django.test import Client as DjangoClient
from django.utils import timezone

from loans.models import ApiToken, PendingTask
from tests.helpers import free_port
from tests.reliability.conftest import ROOT
from tests.reliability.fleet import Fleet

pytestmark = pytest.mark.postgresql


def start_redis(port: int) -> subprocess.Popen:
    server = shutil.which("redis-server") or "/usr/bin/redis-server"
    process = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no"], stdout=subprocess.DEVNULL)
    for _ in range(50):
        try:
            redis.Redis(port=port).ping()
            return process
        except redis.ConnectionError:
            time.sleep(0.1)
    raise AssertionError("redis-server did not start")


def test_with_the_broker_down_nothing_fails_and_jobs_wait_for_it(server, tmp_path, tenant,
                                                                  contract, lead):
    port = free_port()
    broker = start_redis(port)
    app = server(CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0")
    broker.terminate()
    broker.wait()

    fleet = Fleet(app.url, tmp_path, tenant, agents=2, gpus=4, minutes=5)
    fleet.deliver(seconds=30)
    fleet.assert_exactly_stored(tenant)
    assert fleet.refusals == []

    browser = DjangoClient()
    browser.force_login(lead)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    assert app.get(f"/en/tenants/{tenant.slug}/", Cookie=cookie)[0] == 200

    # A burst over the max quota is rejected at once, and the lead is told by e-mail: a job.
    tenant.alert_emails = "lead@example.com"
    tenant.save()
    _record, token = ApiToken.issue(user=lead, name="load", scope=ApiToken.Scope.READ_WRITE)
    now = timezone.now()
    status, answer = app.post("/api/v1/bursts/", json.dumps({
        "contract": contract.pk, "gpus": 10_000, "reason": "too many",
        "starts_at": (now + timedelta(hours=1)).isoformat(),
        "ends_at": (now + timedelta(hours=5)).isoformat()}).encode(),
        Authorization=f"Bearer {token}", **{"Content-Type": "application/json"})
    assert status == 201, answer
    assert json.loads(answer)["state"] == "rejected"
    (waiting,) = PendingTask.objects.all()
    assert waiting.task == "loans.tasks.send_email" and waiting.args[0] == ["lead@example.com"]

    broker = start_redis(port)  # the broker is back; beat runs flush_outbox every minute
    try:
        flushed = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c",
             "from loans.tasks import flush_outbox; print(flush_outbox())"],
            cwd=ROOT, env=app.env, capture_output=True, text=True, check=True)
        assert "1 queued, 0 still waiting" in flushed.stdout
        assert not PendingTask.objects.exists()
        queue = redis.Redis(port=port).lrange("celery", 0, -1)
        assert len(queue) == 1
        assert json.loads(queue[0])["headers"]["task"] == "loans.tasks.send_email"
    finally:
        broker.terminate()
        broker.wait()
