"""The ingestion endpoint under gunicorn, as HTTP clients other than our agent may speak to it."""

import http.client
import json
from datetime import UTC, datetime, timedelta

import pytest

from metering.models import Node, UsageSample

pytestmark = pytest.mark.postgresql


def post_chunked(port: int, token: str, body: bytes) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        # An iterable body with no length: http.client sends it chunked, a piece at a time.
        pieces = (body[k:k + 1000] for k in range(0, len(body), 1000))
        conn.request("POST", "/api/v1/samples", body=pieces, encode_chunked=True,
                     headers={"Authorization": f"Bearer {token}", "Transfer-Encoding": "chunked",
                              "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_a_chunked_batch_is_read_whole_and_stored_within_the_body_limit(server, tenant):
    """Clients that stream a body of unknown length send it chunked, without Content-Length."""
    app = server(INGEST_REQUESTS_PER_MINUTE="0", INGEST_MAX_BODY_BYTES="30000")
    token = Node.objects.create(name="gpu-node-01", default_tenant=tenant).issue_token()
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)
    samples = [{"gpu_uuid": f"GPU-{g}", "ts": (start + timedelta(minutes=k)).isoformat(),
                "interval_s": 60, "allocated": True} for g in range(8) for k in range(50)]

    def body(batch: list) -> bytes:
        return json.dumps({"node": "gpu-node-01", "samples": batch}).encode()

    assert len(body(samples)) > 30000 > len(body(samples[:200]))
    assert post_chunked(app.port, token, body(samples)) == (
        413, {"error": "body over 30000 bytes; send smaller batches"})
    assert post_chunked(app.port, token, body(samples[:200])) == (
        202, {"accepted": 200, "duplicates": 0, "rejected": []})
    assert UsageSample.objects.filter(tenant=tenant).count() == 200
