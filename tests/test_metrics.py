"""Prometheus at /metrics: who may scrape, and that the figures move with what happens."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import config.celery
from loans import tasks
from metering.models import Node
from tests.story import frozen, metered  # noqa: F401

OUTSIDE = "203.0.113.9"


def scrape(client: Client, **headers) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


def value(figures: dict, name: str, **labels) -> float:
    return figures.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def everywhere(settings):
    settings.METRICS_COMMITMENT_SECONDS = 0
    return settings


def test_only_a_token_or_an_allowed_network_may_scrape(db, everywhere):
    everywhere.METRICS_TOKEN = "scrape-secret"
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    outside = Client(REMOTE_ADDR=OUTSIDE)
    refused = outside.get("/metrics")
    assert refused.status_code == 403 and b"gpuloans_" not in refused.content
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    # Through a reverse proxy on the same host every request comes from loopback: the proxy's
    # forwarding header takes the allow-list away, the token still works.
    local = Client(REMOTE_ADDR="127.0.0.1")
    assert local.get("/metrics", HTTP_X_FORWARDED_FOR=OUTSIDE).status_code == 403
    assert local.get("/metrics", HTTP_X_REAL_IP=OUTSIDE).status_code == 403
    assert local.get("/metrics", HTTP_X_FORWARDED_FOR=OUTSIDE,
                     HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    everywhere.METRICS_TOKEN = ""
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
    everywhere.METRICS_ALLOWED_NETWORKS = []
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 403


def test_ingestion_is_counted_by_outcome_reason_and_answer(db, tenant, everywhere):
    node = Node.objects.create(name="gpu-node-01", default_tenant=tenant)
    token = node.issue_token()
    ts = (timezone.now() - timedelta(minutes=5)).isoformat()
    good = {"gpu_uuid": "GPU-1", "ts": ts, "interval_s": 60, "allocated": True}
    batch = [good, {**good, "gpu_uuid": "GPU-2", "interval_s": 0}, {**good, "gpu_uuid": "GPU-3"}]
    client = Client()
    before = scrape(client)
    for _ in range(2):  # the second time, the good samples are duplicates
        client.post("/api/v1/samples", json.dumps({"node": node.name, "samples": batch}),
                    content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    client.post("/api/v1/samples", b"{", content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {token}")
    after = scrape(client)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("gpuloans_ingest_samples_total", outcome="accepted") == 2
    assert moved("gpuloans_ingest_samples_total", outcome="duplicate") == 2
    assert moved("gpuloans_ingest_samples_total", outcome="rejected") == 2
    assert moved("gpuloans_ingest_rejected_samples_total", reason="interval_s") == 2
    assert moved("gpuloans_ingest_batches_total", status="202") == 2
    assert moved("gpuloans_ingest_batches_total", status="400") == 1
    assert moved("gpuloans_ingest_batch_seconds_count") == 2
    assert moved("gpuloans_http_requests_total", method="POST", route="api/v1/samples",
                 status="202") == 2
    assert value(after, "gpuloans_agent_last_seen_timestamp_seconds", node="gpu-node-01") == \
        pytest.approx(Node.objects.get().last_seen_at.timestamp())


def test_an_unknown_path_is_counted_under_one_label(db, everywhere):
    client = Client()
    before = scrape(client)
    for k in range(3):
        client.get(f"/no/such/page/{k}")
    after = scrape(client)
    key = ("gpuloans_http_requests_total",
           (("method", "GET"), ("route", "unmatched"), ("status", "404")))
    assert after[key] - before.get(key, 0) == 3
    assert not any("no/such" in str(labels) for _name, labels in after)


@pytest.mark.usefixtures("metered")
def test_each_contract_shows_its_commitment_used_and_projected(contract, everywhere):
    figures = scrape(Client())
    labels = {"tenant": "vision", "contract": str(contract.pk)}
    committed = value(figures, "gpuloans_commitment_gpu_hours", **labels)
    used = value(figures, "gpuloans_commitment_used_gpu_hours", **labels)
    projected = value(figures, "gpuloans_commitment_projected_gpu_hours", **labels)
    assert committed == float(contract.terms().committed_gpu_hours)
    assert 0 < used <= projected


def test_job_runs_are_counted_by_outcome(db, everywhere, django_capture_on_commit_callbacks):
    config.celery.app.conf.task_always_eager = True
    try:
        before = scrape(Client())
        tasks.check_alerts.delay()
        after = scrape(Client())
    finally:
        config.celery.app.conf.task_always_eager = False
    name, labels = "gpuloans_job_runs_total", {"job": "loans.tasks.check_alerts",
                                               "outcome": "success"}
    assert value(after, name, **labels) - value(before, name, **labels) == 1


def test_gunicorn_start_keeps_the_counts_of_processes_still_running(tmp_path, monkeypatch):
    """A Celery worker shares the directory and outlives a gunicorn restart; its counts stay,
    those of processes that are gone are removed."""
    import os

    from config import gunicorn

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    alive = tmp_path / f"counter_{os.getpid()}.db"
    gone = tmp_path / "counter_999999999.db"
    for path in (alive, gone):
        path.write_bytes(b"")
    gunicorn.on_starting(None)
    assert alive.exists() and not gone.exists()


def test_with_the_database_away_the_counters_still_answer(db, everywhere, monkeypatch, caplog):
    from django.db import OperationalError

    from metering.models import Node as NodeModel

    def away(*_args, **_kwargs):
        raise OperationalError("the database is restarting")

    Client().get("/healthz")  # something counted
    monkeypatch.setattr(NodeModel.objects, "values_list", away)
    figures = scrape(Client())
    assert any(name == "gpuloans_http_requests_total" for name, _labels in figures)
    assert not any(name.startswith("gpuloans_agent_") for name, _labels in figures)
    assert "metrics without database figures" in caplog.text
