"""Request ids and structured logs: every request gets an id (the proxy's X-Request-ID when it
is a sane token, else a new one), every log line written while serving it carries the id, and
one line per request records method, path, status and duration. LOG_FORMAT=json writes each
line as a JSON object for a log pipeline."""

import contextvars
import json
import logging
import re
import time
import uuid

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError

from core import metrics

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
SANE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
log = logging.getLogger("gpuloans.request")
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class ClientFaultFilter(logging.Filter):
    """Django logs each request it refuses for the client's fault (a 403 for a write the user
    may not make, a 400 for a malformed or suspicious request) with the exception's
    traceback: a screen of stack for each refusal, none of them a fault of the code. Such a
    record keeps one line, with the refusal's reason; a 500's traceback is kept."""

    FAULTS = (PermissionDenied, BadRequest, SuspiciousOperation, MultiPartParserError)

    def filter(self, record: logging.LogRecord) -> bool:
        refusal = record.exc_info[1] if record.exc_info else None
        if isinstance(refusal, self.FAULTS) and record.name.startswith("django."):
            reason = str(refusal)
            message = record.getMessage()
            record.msg = f"{message}: {reason}" if reason and reason not in message else message
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class UtcFormatter(logging.Formatter):
    """Times in UTC with a Z, to the millisecond (the plain format's and JsonFormatter's):
    Django sets the process's zone to TIME_ZONE, so logging's default local time named no
    zone and read as UTC elsewhere."""

    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"


class JsonFormatter(UtcFormatter):
    """One JSON object a line; the request's fields where the record has them."""

    FIELDS = ("method", "path", "status", "duration_ms", "node")

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": self.formatTime(record),
            "level": record.levelname, "logger": record.name,
            "request_id": getattr(record, "request_id", "-"), "message": record.getMessage(),
        }
        line.update({k: getattr(record, k) for k in self.FIELDS if hasattr(record, k)})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Request-ID", "")
        rid = given if SANE.match(given) else uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = rid
            seconds = time.perf_counter() - started
            # The query string stays out: it may carry what a user typed.
            log.info("%s %s %s", request.method, request.path, response.status_code, extra={
                "method": request.method, "path": request.path,
                "status": response.status_code, "duration_ms": round(seconds * 1000, 1)})
            # By route, not path: a path may hold any id, and a scanner any number of paths.
            match = request.resolver_match
            metrics.count_request(request.method if request.method in METHODS else "other",
                                  match.route if match else "unmatched",
                                  response.status_code, seconds)
            return response
        finally:
            request_id.reset(token)
