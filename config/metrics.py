"""Prometheus metrics at /metrics, for a site's own Prometheus and Grafana to scrape and alert on.

Counted as things happen (in whichever process they happen), by core.metrics:
  gpuloans_http_requests_total, gpuloans_ingest_samples_total, gpuloans_job_runs_total, ...
Read from the database at scrape time:
  gpuloans_agent_last_seen_timestamp_seconds{node}, gpuloans_agent_dropped_samples{node}
  gpuloans_commitment_gpu_hours{tenant,contract}, ..._used_gpu_hours, ..._projected_gpu_hours
  gpuloans_open_alerts{kind}

Under gunicorn (several worker processes) and Celery, set PROMETHEUS_MULTIPROC_DIR to an empty
directory shared by them (config/gunicorn.py clears it at start and tidies after each worker);
without it each process counts alone, which is right for one process (the demo's runserver).

Who may scrape: a request bearing METRICS_TOKEN, or one from METRICS_ALLOWED_NETWORKS
(loopback by default) that did not come through the reverse proxy (no X-Forwarded-For,
X-Real-IP or Forwarded header: behind a proxy on the same host every request is from
loopback). Everyone else gets 403, and no figure.
"""

import hmac
import ipaddress
import logging
import os
import time

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

import core.metrics  # noqa: F401  (its counters join the registry served here)
from core.bearer import bearer_token

log = logging.getLogger(__name__)

class DatabaseCollector:
    """Figures read from the database when Prometheus scrapes. Commitment figures take a pass
    over every active contract, so they are kept for METRICS_COMMITMENT_SECONDS."""

    NAMES = ("gpuloans_agent_last_seen_timestamp_seconds", "gpuloans_agent_dropped_samples",
             "gpuloans_open_alerts", "gpuloans_commitment_gpu_hours",
             "gpuloans_commitment_used_gpu_hours", "gpuloans_commitment_projected_gpu_hours")

    def __init__(self) -> None:
        self._commitments: tuple[float, list] = (-1e9, [])

    def describe(self):
        """The names, without touching the database (registration happens at import)."""
        return [GaugeMetricFamily(name, "") for name in self.NAMES]

    def collect(self):
        """Nothing while the database is away: the counters still answer, and the missing
        series tell Prometheus what the log says."""
        try:
            families = list(self._families())
        except DatabaseError as error:
            log.warning("metrics without database figures: %s", error)
            return
        yield from families

    def _families(self):
        from loans.models import Alert
        from metering.models import Node

        seen = GaugeMetricFamily("gpuloans_agent_last_seen_timestamp_seconds",
                                 "When each node's agent last posted (Unix time).",
                                 labels=["node"])
        dropped = GaugeMetricFamily("gpuloans_agent_dropped_samples",
                                    "Samples each node's agent dropped (spool full).",
                                    labels=["node"])
        for name, last, lost in Node.objects.values_list("name", "last_seen_at",
                                                         "dropped_samples"):
            if last is not None:
                seen.add_metric([name], last.timestamp())
            dropped.add_metric([name], lost)
        yield seen
        yield dropped
        alerts = GaugeMetricFamily("gpuloans_open_alerts", "Open alerts, by kind.",
                                   labels=["kind"])
        counts: dict[str, int] = {}
        for kind in Alert.objects.filter(state=Alert.State.OPEN).values_list("kind", flat=True):
            counts[kind] = counts.get(kind, 0) + 1
        for kind, n in sorted(counts.items()):
            alerts.add_metric([kind], n)
        yield alerts
        yield from self._commitment_families()

    def _commitment_families(self):
        built, rows = self._commitments
        if time.monotonic() - built > settings.METRICS_COMMITMENT_SECONDS:
            rows = self._commitment_rows()
            self._commitments = (time.monotonic(), rows)
        families = [
            GaugeMetricFamily(f"gpuloans_commitment{part}_gpu_hours", help_text,
                              labels=["tenant", "contract"])
            for part, help_text in (
                ("", "GPU-hours committed in each active contract's current period."),
                ("_used", "GPU-hours used so far in the current period."),
                ("_projected", "GPU-hours the forecast expects by the period's end."))
        ]
        for tenant, contract, values in rows:
            for family, value in zip(families, values, strict=True):
                family.add_metric([tenant, contract], value)
        yield from families

    @staticmethod
    def _commitment_rows() -> list:
        from loans.services.fleet_status import contract_statuses

        return [(s.contract.tenant.slug, str(s.contract.pk),
                 (float(s.figures.committed_gpu_hours), float(s.figures.used_gpu_hours),
                  float(s.figures.projected_used_gpu_hours)))
                for s in contract_statuses(timezone.now(), sort="tenant", descending=False)]


database = DatabaseCollector()
REGISTRY.register(database)


PROXIED = ("X-Forwarded-For", "X-Real-IP", "Forwarded")


def _allowed(request: HttpRequest) -> bool:
    expected = settings.METRICS_TOKEN
    if expected:
        given = bearer_token(request.headers.get("Authorization", ""))
        if given is not None and hmac.compare_digest(given.encode(), expected.encode()):
            return True
    if any(name in request.headers for name in PROXIED):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in settings.METRICS_ALLOWED_NETWORKS)


def view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse("metrics: send the metrics token, or scrape from an allowed network\n",
                            status=403, content_type="text/plain; charset=utf-8")
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        registry.register(database)
    else:
        registry = REGISTRY
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
