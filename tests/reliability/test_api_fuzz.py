"""The whole API fuzzed from its own OpenAPI schema (schemathesis): as an operator, who may
call everything, and as a lead; no answer may be a server error or break the schema."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from config.wsgi import application
from loans.models import ApiToken
from tests.tiers import examples

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance,
          content_type_conformance]


@pytest.fixture
def api_schema(db):
    # As Django's test client does: the test's transaction must outlive each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def bearer(user) -> dict:
    _record, token = ApiToken.issue(user=user, name="fuzz", scope=ApiToken.Scope.READ_WRITE)
    return {"Authorization": f"Bearer {token}"}


def fuzz(schema, headers: dict) -> int:
    """Every operation of the schema, each with generated calls; returns how many."""
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=examples(EXAMPLES), deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def call(case):
            nonlocal calls
            calls += 1
            # Schemathesis's in-process transport asks for gzip but does not unpack it (an
            # HTTP client does); the answers are read as they are written.
            case.call_and_validate(headers={**headers, "Accept-Encoding": "identity"},
                                   checks=CHECKS)

        call()
    return calls


EXAMPLES = 25


def test_as_an_operator_no_call_is_a_server_error_or_breaks_the_schema(api_schema, operator,
                                                                          contract):
    assert fuzz(api_schema, bearer(operator)) > 20 * examples(EXAMPLES)


def test_as_a_lead_no_call_is_a_server_error_or_breaks_the_schema(api_schema, lead, contract):
    assert fuzz(api_schema, bearer(lead)) > 20 * examples(EXAMPLES)
