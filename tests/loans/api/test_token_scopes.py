"""Personal API tokens carry a scope and an expiry (DESIGN.md, "Who logs in"): a read token
reads what its user may read and is refused every write with 403, whatever the endpoint; an
expired or revoked token is refused with 401; an unknown scope is refused at creation."""

import json
import re
from datetime import timedelta

import pytest
import time_machine
from django.core.management.base import CommandError
from django.utils import timezone

from loans.models import ApiToken
from tests.test_commands import run

WRITES = ("post", "put", "patch", "delete")


def header(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def write_operations(client) -> list[tuple[str, str]]:
    schema = json.loads(client.get("/api/schema/", HTTP_ACCEPT="application/json").content)
    return [(method, path) for path, operations in schema["paths"].items()
            if path != "/api/v1/samples"  # the nodes' endpoint, with node tokens
            for method in operations if method in WRITES]


def test_a_read_token_reads_and_is_refused_every_write_the_schema_lists(client, operator,
                                                                        contract):
    _record, token = ApiToken.issue(user=operator, name="grafana")
    assert client.get("/api/v1/contracts/", **header(token)).status_code == 200
    assert client.get(f"/api/v1/contracts/{contract.pk}/statements",
                      **header(token)).status_code == 200
    operations = write_operations(client)
    assert len(operations) > 20
    for method, path in operations:
        url = re.sub(r"\{[^}]+\}", str(contract.pk), path.replace("{slug}", "vision"))
        answer = getattr(client, method)(url, "{}", content_type="application/json",
                                         **header(token))
        assert answer.status_code == 403, (method, path, answer.status_code)
        assert answer.json()["detail"] == (
            f"This token's scope is read: it may not {method.upper()}. Use a token with the "
            "read write scope.")
    contract.refresh_from_db()
    assert contract.status == contract.Status.ACTIVE


def test_a_read_write_token_writes_as_its_user(client, operator, tenant, plan):
    _record, token = ApiToken.issue(user=operator, name="ci", scope=ApiToken.Scope.READ_WRITE)
    answer = client.post("/api/v1/contracts/", {"tenant": tenant.slug, "plan": plan.pk,
                                                "starts_on": "2027-01-01"},
                         content_type="application/json", **header(token))
    assert answer.status_code == 201, answer.content


def test_an_expired_or_revoked_token_is_refused_with_401(client, operator):
    record, token = ApiToken.issue(user=operator, name="short",
                                   expires_at=timezone.now() + timedelta(days=1))
    assert client.get("/api/v1/plans/", **header(token)).status_code == 200
    with time_machine.travel(timezone.now() + timedelta(days=1, seconds=1)):
        answer = client.get("/api/v1/plans/", **header(token))
    assert answer.status_code == 401
    assert answer.json()["detail"].startswith("This API token expired on ")
    record.delete()  # revoked
    assert client.get("/api/v1/plans/", **header(token)).status_code == 401


def test_a_token_from_before_scopes_still_writes_and_never_expires(db, operator):
    """Migration 0032: tokens issued before keep what they could do."""
    from django.apps import apps
    field = apps.get_model("loans", "ApiToken")._meta.get_field("scope")
    assert field.default == ApiToken.Scope.READ  # new ones read only unless asked
    record, _token = ApiToken.issue(user=operator, name="old")
    ApiToken.objects.filter(pk=record.pk).update(scope="read write", expires_at=None)
    record.refresh_from_db()
    assert record.writes and not record.expired(timezone.now() + timedelta(days=10_000))


@pytest.mark.parametrize(("args", "message"), [
    (("--scope", "admin"), "--scope: unknown scope 'admin'"),
    (("--days", "0"), "--days must be 1 to 3650"),
    (("--days", "4000"), "--days must be 1 to 3650"),
])
def test_the_command_refuses_an_unknown_scope_or_expiry(lead, args, message):
    with pytest.raises(CommandError, match=message):
        run("create_api_token", "lead", *args)
    assert not ApiToken.objects.exists()


def test_the_command_issues_the_scope_and_expiry_asked_for(lead):
    out, err = run("create_api_token", "lead", "--scope", "read write", "--days", "30")
    record = ApiToken.objects.get()
    assert record.scope == "read write" and "scope read write" in err
    assert timedelta(days=29, hours=23) < record.expires_at - timezone.now() <= timedelta(days=30)
    assert out.strip().startswith("gplu_")
