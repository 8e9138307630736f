"""POST /api/v1/samples: agent protocol v1. A plain Django view, not DRF: this is the hot path.

Every refusal is a JSON object {"error": "..."} with the status the README names.
"""

import time

import orjson
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from core import metrics
from core.bearer import bearer_token
from core.clientip import client_ip
from metering.intake import protocol, wire
from metering.intake.ingest import Result, ingest, node_for_token
from metering.models import Node


def _answer(status: int, payload: dict, **headers: str) -> HttpResponse:
    body = orjson.dumps(payload)
    response = HttpResponse(body, status=status, content_type="application/json")
    # The endpoint skips CommonMiddleware (metering.intake.middleware), which would set this;
    # without it gunicorn sends the answer chunked.
    response["Content-Length"] = str(len(body))
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _refuse(status: int, message: str, **headers: str) -> HttpResponse:
    return _answer(status, {"error": message}, **headers)


def _throttled(node: Node) -> int:
    """Seconds to wait when this node is over its rate, else 0 (a fixed one-minute window)."""
    limit = settings.INGEST_REQUESTS_PER_MINUTE
    if not limit:
        return 0
    window = int(time.time() // 60)
    key = f"ingest-rate:{node.pk}:{window}"
    cache.add(key, 0, timeout=120)
    if cache.incr(key) > limit:
        return 60 - int(time.time() % 60)
    return 0


def _guessing(address: str) -> int:
    """Counts one more unknown token from this address this minute; returns the seconds to
    wait when it has sent too many, else 0. Only unknown tokens are refused for it: a node
    with a valid token is never throttled because others' tokens failed from its address (a
    shared NAT, a cluster user on the node), and tokens are 256 random bits, so a guess
    cannot come right."""
    limit = settings.INGEST_UNKNOWN_TOKENS_PER_MINUTE
    if not limit:
        return 0
    key = f"ingest-unknown:{address}:{int(time.time() // 60)}"
    cache.add(key, 0, timeout=120)
    if cache.incr(key) > limit:
        return 60 - int(time.time() % 60)
    return 0


def _token(request: HttpRequest) -> str | None:
    return bearer_token(request.headers.get("Authorization", ""))


def _body(request: HttpRequest, limit: int) -> bytes | HttpResponse:
    """At most limit + 1 bytes of the body, or the refusal of a body this view cannot read.

    A chunked body (no Content-Length; some HTTP clients stream so) is read when the server
    has decoded it and says the input ends (gunicorn sets wsgi.input_terminated); Django
    itself would read it as empty."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return _refuse(400, f"Content-Encoding {encoding[:40]!r} is not accepted; "
                            "send the batch as plain JSON")
    try:
        if "chunked" not in request.headers.get("Transfer-Encoding", "").lower():
            return request.read(limit + 1)
        if not request.META.get("wsgi.input_terminated"):
            return _refuse(400, "this server reads no chunked bodies; send a Content-Length")
        return request.META["wsgi.input"].read(limit + 1)
    except OSError:  # the client stopped mid-body, or sent chunks the server cannot decode
        return _refuse(400, "the body ended before it was complete; send the batch again")


@csrf_exempt
def samples(request: HttpRequest) -> HttpResponse:
    started = time.perf_counter()
    answer = _store_batch(request)
    if isinstance(answer, HttpResponse):  # refused
        metrics.count_batch(answer.status_code, time.perf_counter() - started)
        return answer
    metrics.count_batch(202, time.perf_counter() - started, answer)
    return _answer(202, answer.as_dict())


def _store_batch(request: HttpRequest) -> HttpResponse | Result:
    """What was stored of the batch, or the refusal."""
    if request.method != "POST":
        return _refuse(405, "use POST", Allow="POST")
    token = _token(request)
    if token is None:
        return _refuse(401, "send the node token as 'Authorization: Bearer <token>'",
                       WWW_Authenticate="Bearer")
    limit = settings.INGEST_MAX_BODY_BYTES
    too_big = f"body over {limit} bytes; send smaller batches"
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        return _refuse(413, too_big)
    try:
        node = node_for_token(token)
        if node is None:
            wait = _guessing(client_ip(request))
            if wait:
                return _refuse(429, "too many unknown tokens from this address",
                               Retry_After=str(wait))
            return _refuse(401, "unknown or revoked node token", WWW_Authenticate="Bearer")
        wait = _throttled(node)
        if wait:
            return _refuse(429, "too many requests from this node", Retry_After=str(wait))
        body = _body(request, limit)
        if isinstance(body, HttpResponse):
            return body
        if len(body) > limit:
            return _refuse(413, too_big)
        envelope = wire.parse(body)
        if envelope.node != node.name:
            return _refuse(
                403, f"this token belongs to node {node.name!r}, not {envelope.node[:63]!r}"
            )
        if len(envelope.samples) > settings.INGEST_MAX_SAMPLES:
            return _refuse(413, f"batch of {len(envelope.samples)} samples is over the limit of "
                                f"{settings.INGEST_MAX_SAMPLES}")
        result = ingest(node, envelope, now=timezone.now())
    except protocol.ProtocolError as error:
        return _refuse(error.status, error.message)
    except (OperationalError, InterfaceError):
        # Unreachable, restarting, or a deadlock victim: nothing of the batch was stored.
        return _refuse(503, "database busy or unavailable; keep the batch and retry",
                       Retry_After="5")
    return result
