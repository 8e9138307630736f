"""Request ids on every answer and log line; JSON logs; login throttled after failures."""

import json
import logging

import pytest

from config.requestlog import JsonFormatter, RequestIdFilter
from tests.conftest import PASSWORD


def test_every_answer_carries_a_request_id_and_a_sane_one_is_kept(client, db):
    fresh = client.get("/healthz")
    assert len(fresh["X-Request-ID"]) == 32
    assert client.get("/healthz", HTTP_X_REQUEST_ID="proxy-42.a")["X-Request-ID"] == "proxy-42.a"
    hostile = client.get("/healthz", HTTP_X_REQUEST_ID="x\r\nSet-Cookie: a=b" + "y" * 80)
    assert hostile["X-Request-ID"] != "x" and len(hostile["X-Request-ID"]) == 32


def test_a_request_is_logged_once_with_its_id_status_and_duration(client, db, caplog):
    with caplog.at_level(logging.INFO, logger="gpuloans.request"):
        client.get("/healthz?secret=1", HTTP_X_REQUEST_ID="abc123")
    (record,) = [r for r in caplog.records if r.name == "gpuloans.request"]
    assert (record.method, record.path, record.status) == ("GET", "/healthz", 200)
    assert record.duration_ms >= 0 and "secret" not in record.getMessage()
    line = json.loads(JsonFormatter().format(_with_id(record, "abc123")))
    assert line["request_id"] == "abc123" and line["status"] == 200
    assert line["logger"] == "gpuloans.request" and line["level"] == "INFO"


def _with_id(record, rid):
    record.request_id = rid
    return record


def test_lines_logged_outside_a_request_say_so():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    RequestIdFilter().filter(record)
    assert record.request_id == "-"


@pytest.mark.parametrize("url", ["/en/accounts/login/", "/en/admin/login/"])
def test_logins_are_throttled_after_repeated_failures(client, operator, settings, url):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        page = client.post(url, {"username": "operator", "password": "wrong"})
        assert page.status_code == 200
    # The third failure pauses this user from this address; the right password waits too.
    assert client.post(url, {"username": "operator", "password": "wrong"}).status_code == 429
    page = client.post(url, {"username": "operator", "password": PASSWORD})
    assert page.status_code == 429
    assert "paused for 15 minutes after 3 failed attempts" in page.content.decode()
    # Another user from the same address is not locked out.
    assert client.post(url, {"username": "someone", "password": "x"}).status_code == 200


def test_a_good_login_before_the_limit_goes_through(client, lead, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client.post("/en/accounts/login/", {"username": "lead", "password": "wrong"})
    response = client.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD})
    assert response.status_code == 302


def test_no_secret_reaches_the_logs(client, db, lead, operator, caplog):
    """Tokens and passwords, given right and wrong, in headers, bodies and query strings."""
    from loans.models import ApiToken
    from metering.models import Node

    node = Node.objects.create(name="gpu-node-01")
    node_token = node.issue_token()
    _record, api_token = ApiToken.issue(user=lead, name="ci")
    secrets = [node_token, api_token, PASSWORD, "wrong-password-123"]
    with caplog.at_level(logging.DEBUG):
        client.post("/api/v1/samples", b'{"node": "gpu-node-01", "samples": [{}]}',
                    content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {node_token}")
        client.post("/api/v1/samples", b"{", content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {node_token}x")
        client.get(f"/api/v1/tenants/vision/usage?token={api_token}",
                   HTTP_AUTHORIZATION=f"Bearer {api_token}")
        client.get("/api/v1/bursts/", HTTP_AUTHORIZATION=f"Bearer {api_token}x")
        client.post("/en/accounts/login/", {"username": "lead", "password": "wrong-password-123"})
        client.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD})
        client.get(f"/metrics?token={node_token}")
    lines = [JsonFormatter().format(_with_id(r, "x")) for r in caplog.records]
    lines += [r.getMessage() for r in caplog.records]
    assert len(caplog.records) >= 7
    for secret in secrets:
        assert not any(secret in line for line in lines), secret


@pytest.fixture
def console():
    """What the application's console handler (settings.LOGGING) writes, for one test."""
    import io

    (handler,) = [h for h in logging.getLogger().handlers
                  if any(isinstance(f, RequestIdFilter) for f in h.filters)]
    written = io.StringIO()
    previous = handler.setStream(written)
    yield written
    handler.setStream(previous)


def test_a_refused_request_is_logged_in_one_line_with_its_reason(client, operator, console):
    from django.urls import reverse

    # Statements are written by the ledger, never added by hand: the admin refuses with a 403.
    client.force_login(operator)
    assert client.get(reverse("admin:loans_statement_add")).status_code == 403
    assert client.get("/healthz", HTTP_HOST="evil.example").status_code == 400
    written = console.getvalue()
    assert "Forbidden (Permission denied): /en/admin/loans/statement/add/" in written
    assert "Invalid HTTP_HOST header: 'evil.example'" in written
    assert "Traceback" not in written


def test_a_failure_of_the_code_keeps_its_traceback():
    from config.requestlog import ClientFaultFilter

    try:
        raise ValueError("a bug")
    except ValueError:
        import sys

        record = logging.LogRecord("django.request", logging.ERROR, __file__, 1,
                                   "Internal Server Error: %s", ("/x",), sys.exc_info())
    assert ClientFaultFilter().filter(record)
    assert record.exc_info and record.getMessage() == "Internal Server Error: /x"


def test_plain_log_lines_give_their_time_in_utc(console):
    """The process runs in TIME_ZONE (Asia/Shanghai by default); a line's time says Z."""
    import re
    from datetime import UTC, datetime

    logging.getLogger("gpuloans.test").warning("hello")
    (line,) = console.getvalue().splitlines()
    stamp = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z WARNING gpuloans.test", line)
    assert stamp, line
    written = datetime.strptime(stamp[1], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - written).total_seconds()) < 60
