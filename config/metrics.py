"""Prometheus metrics at /metrics, for a site's own Prometheus and Grafana to scrape and alert on.

Counted as things happen (in whichever process they happen):
  gpuloans_http_requests_total{method,route,status}, gpuloans_http_request_seconds{method,route}
  gpuloans_ingest_samples_total{outcome}: accepted, duplicate, rejected
  gpuloans_ingest_rejected_samples_total{reason}: the field or rule a rejected sample broke
  gpuloans_ingest_batches_total{status}, gpuloans_ingest_batch_seconds
  gpuloans_job_runs_total{job,outcome}: success, failure, retry (Celery tasks)
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
import re
import time
from collections import Counter as Tally

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

from core.bearer import bearer_token

log = logging.getLogger(__name__)

http_requests = Counter("gpuloans_http_requests", "HTTP requests answered.",
                        ["method", "route", "status"])
http_seconds = Histogram("gpuloans_http_request_seconds", "Time to answer an HTTP request.",
                         ["method", "route"],
                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
ingest_samples = Counter("gpuloans_ingest_samples", "Samples posted by agents, by outcome.",
                         ["outcome"])
ingest_rejected = Counter("gpuloans_ingest_rejected_samples",
                          "Samples rejected, by the field or rule they broke.", ["reason"])
ingest_batches = Counter("gpuloans_ingest_batches", "Batches posted by agents, by answer.",
                         ["status"])
ingest_seconds = Histogram("gpuloans_ingest_batch_seconds", "Time to store one batch.",
                           buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5))
job_runs = Counter("gpuloans_job_runs", "Background job runs, by outcome.", ["job", "outcome"])

# The first word of a rejection ("interval_s 0 is out of range", "conflict: ...",
# "owner.pod must ...") names its reason; the set of such words is small and fixed.
_REASON = re.compile(r"[a-z_]+")


def count_batch(status: int, seconds: float, result=None) -> None:
    """Count one POST /api/v1/samples: its answer, and if stored, its samples' outcomes."""
    ingest_batches.labels(str(status)).inc()
    if result is None:
        return
    ingest_seconds.observe(seconds)
    ingest_samples.labels("accepted").inc(result.accepted)
    ingest_samples.labels("duplicate").inc(result.duplicates)
    ingest_samples.labels("rejected").inc(len(result.rejected))
    # Counted by reason first: a batch of thousands of refusals costs a few label lookups.
    reasons = Tally(match.group() if (match := _REASON.match(item["error"])) else "other"
                      for item in result.rejected)
    for reason, count in reasons.items():
        ingest_rejected.labels(reason).inc(count)


def count_request(method: str, route: str, status: int, seconds: float) -> None:
    http_requests.labels(method, route, str(status)).inc()
    http_seconds.labels(method, route).observe(seconds)


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
