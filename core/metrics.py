"""The counters every process keeps as things happen, for Prometheus (config/metrics.py
serves them at /metrics with the figures read from the database):
  gpuloans_http_requests_total{method,route,status}, gpuloans_http_request_seconds{method,route}
  gpuloans_ingest_samples_total{outcome}: accepted, duplicate, rejected
  gpuloans_ingest_rejected_samples_total{reason}: the field or rule a rejected sample broke
  gpuloans_ingest_batches_total{status}, gpuloans_ingest_batch_seconds
  gpuloans_job_runs_total{job,outcome}: success, failure, retry (Celery tasks)

Below every app: the agents' endpoint, the request log and the Celery signals count here
without reaching the configuration (which reads the apps' models).
"""

import re
from collections import Counter as Tally

from prometheus_client import Counter, Histogram

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
