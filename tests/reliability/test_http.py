"""The ingestion endpoint under gunicorn, as HTTP clients other than our agent may speak to it."""

import json
import socket
from datetime import UTC, datetime, timedelta

import pytest

from metering.models import Node, UsageSample

pytestmark = pytest.mark.postgresql


def test_a_chunked_batch_is_read_whole_and_stored_within_the_body_limit(server, tenant):
    """Clients that stream a body of unknown length send it chunked, without Content-Length."""
    app = server(INGEST_REQUESTS_PER_MINUTE="0", INGEST_MAX_BODY_BYTES="30000")
    token = Node.objects.create(name="gpu-node-01", default_tenant=tenant).issue_token()
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)
    samples = [{"gpu_uuid": f"GPU-{g}", "ts": (start + timedelta(minutes=k)).isoformat(),
                "interval_s": 60, "allocated": True} for g in range(8) for k in range(50)]

    def post_chunked(batch: list) -> tuple[int, dict]:
        body = json.dumps({"node": "gpu-node-01", "samples": batch}).encode()
        # A body with no length: http.client sends it chunked, a piece at a time.
        pieces = (body[k:k + 1000] for k in range(0, len(body), 1000))
        status, answer = app.post("/api/v1/samples", pieces, Authorization=f"Bearer {token}",
                                  **{"Content-Type": "application/json"})
        return status, json.loads(answer)

    assert post_chunked(samples) == (413, {"error": "body over 30000 bytes; send smaller batches"})
    assert post_chunked(samples[:200]) == (202, {"accepted": 200, "duplicates": 0, "rejected": []})
    assert UsageSample.objects.filter(tenant=tenant).count() == 200


def test_a_chunked_body_cut_off_midway_is_a_400_not_a_server_error(server, tenant):
    app = server(INGEST_REQUESTS_PER_MINUTE="0")
    token = Node.objects.create(name="gpu-node-01", default_tenant=tenant).issue_token()
    body = json.dumps({"node": "gpu-node-01", "samples": []}).encode()
    with socket.create_connection(("127.0.0.1", app.port), timeout=30) as conn:
        conn.sendall(
            b"POST /api/v1/samples HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{len(body) + 500:x}\r\n".encode() + body)  # 500 bytes short, and no end
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status == 400, answer
    assert b"the body ended before it was complete" in answer
