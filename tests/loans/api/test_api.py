"""The REST API as integrations and operators call it, with API tokens."""

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pytest
import time_machine
from django.db import DatabaseError, transaction
from django.test import Client
from django.utils import timezone

from loans.models import ApiToken, Contract, Plan, Tenant
from loans.services.ledger.amendments import amend
from metering.models import AttributionRule, Gpu, Node, UsageSample
from metering.recount import rebuild_rollups
from metering.usage import floor_hour

HOUR = timedelta(hours=1)


def bearer(user) -> dict:
    _record, token = ApiToken.issue(user=user, name="test", scope=ApiToken.Scope.READ_WRITE)
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.fixture
def metered(tenant):
    """Five hours of samples: two GPUs on the hour, minute by minute, half busy."""
    node = Node.objects.create(name="gpu-node-01", default_tenant=tenant)
    gpus = [Gpu.objects.create(uuid=f"GPU-{i}", node=node, index=i) for i in range(2)]
    end = floor_hour(timezone.now()) - HOUR
    start = end - 5 * HOUR
    moment = start
    while moment < end:
        for gpu in gpus:
            UsageSample.objects.create(gpu=gpu, ts=moment, tenant=tenant,
                                       interval_s=60, allocated=True, util_pct=50.0)
        moment += timedelta(minutes=1)
    rebuild_rollups(start, end)
    return start, end


def usage(client, slug, headers, **query):
    return client.get(f"/api/v1/tenants/{slug}/usage", query, **headers)


@pytest.mark.parametrize(("actor", "status"), [
    ("lead", 200), ("member", 200), ("outsider", 404), ("operator", 200),
])
def test_usage_is_visible_to_its_tenant_and_operators_only(client, request, metered, actor,
                                                           status):
    response = usage(client, "vision", bearer(request.getfixturevalue(actor)))
    assert response.status_code == status


def test_usage_without_or_with_a_bad_token_is_refused(client, metered):
    assert usage(client, "vision", {}).status_code in (401, 403)
    response = usage(client, "vision", {"HTTP_AUTHORIZATION": "Bearer gplu_forged"})
    assert response.status_code == 401
    assert "Unknown or revoked API token" in response.json()["detail"]


def test_another_tenant_and_a_missing_one_look_the_same_to_a_lead(client, lead, other_tenant):
    headers = bearer(lead)
    assert usage(client, "speech", headers).status_code == 404
    assert usage(client, "no-such-tenant", headers).status_code == 404


def test_hourly_usage_agrees_with_a_recount_of_the_raw_samples(client, lead, metered):
    start, end = metered
    answer = usage(client, "vision", bearer(lead), start=start.isoformat(),
                   end=end.isoformat()).json()
    assert answer["granularity"] == "hour"
    assert len(answer["rows"]) == 5
    for row in answer["rows"]:
        hour = datetime.fromisoformat(row["start"])
        samples = UsageSample.objects.filter(ts__gte=hour, ts__lt=hour + HOUR)
        assert row["allocated_gpu_hours"] == sum(s.interval_s for s in samples) / 3600
        assert row["busy_gpu_hours"] == sum(s.interval_s * 0.5 for s in samples) / 3600
        assert row["samples"] == samples.count() == 120
        assert row["peak_gpus"] == 2
    assert answer["totals"]["allocated_gpu_hours"] == 10.0


def test_daily_usage_sums_hours_by_local_day_and_fills_gaps_with_zeros(client, operator,
                                                                         metered):
    start, end = metered
    answer = usage(client, "vision", bearer(operator), granularity="day", tz="UTC",
                   start=(start - timedelta(days=2)).date().isoformat(),
                   end=(end + timedelta(days=1)).date().isoformat()).json()
    assert answer["time_zone"] == "UTC"
    assert sum(row["allocated_gpu_hours"] for row in answer["rows"]) == 10.0
    assert answer["rows"][0]["allocated_gpu_hours"] == 0
    assert all(row["start"].endswith("+00:00") for row in answer["rows"])


@pytest.mark.parametrize(("query", "field", "message"), [
    ({"start": "yesterday"}, "start", "is not an ISO 8601 date"),
    ({"start": "2026-11-02", "end": "2026-11-01"}, "end", "end must be after start"),
    ({"start": "2026-01-01", "end": "2026-12-01"}, "start", "At most 93 days by the hour"),
    ({"granularity": "minute"}, "granularity", "is not a valid choice"),
    ({"tz": "Mars/Olympus"}, "tz", "is not an IANA time zone"),
])
def test_a_bad_usage_query_is_a_400_naming_the_parameter(client, lead, query, field, message):
    response = usage(client, "vision", bearer(lead), **query)
    assert response.status_code == 400
    assert message in str(response.json()[field])


def test_usage_comes_as_a_csv_file_with_the_same_rows(client, lead, metered):
    start, end = metered
    query = {"start": start.isoformat(), "end": end.isoformat()}
    answer = usage(client, "vision", bearer(lead), **query).json()
    response = usage(client, "vision", bearer(lead), format="csv", **query)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith(
        'attachment; filename="vision-usage-by-hour-')
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["start", "allocated_gpu_hours", "busy_gpu_hours", "peak_gpus", "samples"]
    assert len(rows) == 1 + 5
    assert rows[1:] == [[str(row[name]) for name in rows[0]] for row in answer["rows"]]


def test_a_refused_csv_usage_query_answers_in_json(client, lead, other_tenant):
    response = usage(client, "vision", bearer(lead), format="csv", granularity="minute")
    assert response.status_code == 400
    assert "is not a valid choice" in str(response.json()["granularity"])
    response = usage(client, "speech", bearer(lead), format="csv")
    assert response.status_code == 404
    assert response.json() == {"detail": "No such tenant."}


def api(client, method, url, headers, body=None):
    return getattr(client, method)(url, json.dumps(body) if body is not None else None,
                                   content_type="application/json", **headers)


def test_operators_manage_tenants_with_their_attribution_rules(client, operator):
    headers = bearer(operator)
    created = api(client, "post", "/api/v1/tenants/", headers, {
        "slug": "nlp", "name": "NLP", "attribution_rules": [
            {"field": "namespace", "value": "nlp"}, {"field": "user", "value": "ann"}]})
    assert created.status_code == 201, created.json()
    assert {r["value"] for r in created.json()["attribution_rules"]} == {"nlp", "ann"}
    replaced = api(client, "patch", "/api/v1/tenants/nlp/", headers, {
        "attribution_rules": [{"field": "account", "value": "proj-nlp", "priority": 5}]})
    assert replaced.status_code == 200
    assert list(AttributionRule.objects.values_list("field", "value")) == [
        ("account", "proj-nlp")]


def test_a_rule_another_tenant_holds_is_refused_with_its_owner(client, operator, tenant):
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="shared")
    response = api(client, "post", "/api/v1/tenants/", bearer(operator), {
        "slug": "nlp", "name": "NLP", "attribution_rules": [
            {"field": "namespace", "value": "shared"}]})
    assert response.status_code == 400
    assert "namespace=shared (vision)" in str(response.json())
    assert not Tenant.objects.filter(slug="nlp").exists()


def test_an_impossible_plan_is_a_400_with_the_models_message(client, operator):
    response = api(client, "post", "/api/v1/plans/", bearer(operator), {
        "name": "Broken", "base_quota_gpus": 8, "max_quota_gpus": 4,
        "committed_gpu_hours": "100", "committed_rate": "10", "term_months": 12})
    assert response.status_code == 400
    assert "The max quota cannot be below the base quota." in str(response.json())
    assert not Plan.objects.filter(name="Broken").exists()


def test_a_fee_finer_than_its_currencys_minor_unit_is_a_400_and_fees_read_in_it(
        client, operator):
    headers = bearer(operator)
    plan = {"name": "Yen", "base_quota_gpus": 1, "max_quota_gpus": 4, "currency": "JPY",
            "committed_gpu_hours": "100", "committed_rate": "10", "term_months": 12}
    refused = api(client, "post", "/api/v1/plans/", headers, {**plan, "upfront_fee": "100.5"})
    assert refused.status_code == 400
    assert "whole number of 1 JPY" in str(refused.json())
    made = api(client, "post", "/api/v1/plans/", headers, {**plan, "upfront_fee": "50000"})
    assert made.status_code == 201, made.json()
    assert made.json()["upfront_fee"] == "50000"
    dinar = api(client, "post", "/api/v1/plans/", headers, {
        **plan, "name": "Dinar", "currency": "KWD", "upfront_fee": "12.345"})
    assert dinar.status_code == 201 and dinar.json()["upfront_fee"] == "12.345"


def test_an_overlapping_contract_is_a_400_and_a_good_one_is_created(client, operator,
                                                                      contract, plan):
    headers = bearer(operator)
    clash = api(client, "post", "/api/v1/contracts/", headers, {
        "tenant": "vision", "plan": plan.pk, "starts_on": "2027-01-01", "status": "active"})
    assert clash.status_code == 400
    assert "already has a contract in force" in str(clash.json())
    renewal = api(client, "post", "/api/v1/contracts/", headers, {
        "tenant": "vision", "plan": plan.pk, "starts_on": str(contract.ends_on),
        "status": "active", "committed_gpu_hours": "1200.00"})
    assert renewal.status_code == 201, renewal.json()
    assert renewal.json()["ends_on"] == "2028-11-01"
    listed = client.get("/api/v1/contracts/", {"tenant": "vision", "status": "active"}, **headers)
    assert listed.json()["count"] == 2


def test_a_contract_signed_over_the_api_copies_its_plan_and_changes_only_by_amendment(
        client, operator, contract, plan):
    headers = bearer(operator)
    signed = client.get(f"/api/v1/contracts/{contract.pk}/", **headers).json()
    assert (signed["committed_rate"], signed["overage_rate"], signed["currency"]) == (
        "10.0000", "12.0000", "CNY")
    assert signed["signed_at"] is not None and signed["window_start"] == "2026-11-01T00:00:00+08:00"
    patched = api(client, "patch", f"/api/v1/contracts/{contract.pk}/", headers,
                  {"committed_rate": "9.00"})
    assert patched.status_code == 400
    assert "only by an amendment" in str(patched.json()["committed_rate"])
    contract.refresh_from_db()
    assert contract.committed_rate == 10


def test_a_contract_shows_the_terms_in_force_beside_those_signed(client, operator, contract):
    amend(contract=contract, changes={"committed_gpu_hours": "3000", "committed_rate": "12"},
          from_period=1, reason="renegotiated", now=datetime(2026, 11, 10, tzinfo=UTC))
    with time_machine.travel(datetime(2026, 12, 5, tzinfo=UTC), tick=False):
        shown = client.get(f"/api/v1/contracts/{contract.pk}/", **bearer(operator)).json()
    assert (shown["committed_gpu_hours"], shown["committed_rate"]) == ("1000.00", "10.0000")
    assert shown["terms_in_force"] == {
        "period": 2, "base_quota_gpus": "8", "max_quota_gpus": "16",
        "committed_gpu_hours": "3000.00", "committed_rate": "12.0000", "overage_rate": "12.0000"}


@pytest.mark.parametrize("field", ["tenant", "plan"])
def test_a_signed_contract_cannot_be_moved_to_another_tenant_or_plan(
        client, operator, tenant, contract, plan, other_tenant, field):
    other_plan = Plan.objects.create(
        name="Other", base_quota_gpus=1, max_quota_gpus=2, committed_gpu_hours=D(10),
        committed_rate=D(1), term_months=12, currency="CNY")
    value = {"tenant": other_tenant.slug, "plan": other_plan.pk}[field]
    target = {"tenant": other_tenant, "plan": other_plan}[field]
    patched = api(client, "patch", f"/api/v1/contracts/{contract.pk}/", bearer(operator),
                  {field: value})
    assert patched.status_code == 400, patched.content
    assert "only by an amendment" in str(patched.json()[field])
    with pytest.raises(DatabaseError), transaction.atomic():
        Contract.objects.filter(pk=contract.pk).update(**{field: target})
    contract.refresh_from_db()
    assert (contract.tenant_id, contract.plan_id) == (tenant.pk, plan.pk)


def test_deleting_a_plan_in_use_is_a_409_not_a_server_error(client, operator, contract, plan):
    response = client.delete(f"/api/v1/plans/{plan.pk}/", **bearer(operator))
    assert response.status_code == 409
    assert "contracts" in response.json()["detail"]


def test_creating_a_node_returns_its_token_once(client, operator, tenant):
    headers = bearer(operator)
    created = api(client, "post", "/api/v1/nodes/", headers,
                  {"name": "gpu-node-07", "default_tenant": "vision"})
    assert created.status_code == 201
    token = created.json()["token"]
    node = Node.objects.get(name="gpu-node-07")
    assert Node.objects.by_token(token) == node and node.default_tenant == tenant
    shown = client.get(f"/api/v1/nodes/{node.pk}/", **headers).json()
    assert "token" not in shown and shown["has_token"] is True
    rotated = api(client, "post", f"/api/v1/nodes/{node.pk}/rotate-token/", headers).json()
    assert Node.objects.by_token(token) is None
    assert Node.objects.by_token(rotated["token"]) == node
    api(client, "post", f"/api/v1/nodes/{node.pk}/revoke-token/", headers)
    assert Node.objects.by_token(rotated["token"]) is None


def test_a_bad_node_name_is_a_400(client, operator):
    response = api(client, "post", "/api/v1/nodes/", bearer(operator), {"name": "bad name!"})
    assert response.status_code == 400
    assert "Use 1-63 letters" in str(response.json()["name"])


@pytest.mark.parametrize("actor", ["lead", "member", "outsider"])
def test_tenant_users_cannot_use_the_operators_api(client, request, actor):
    headers = bearer(request.getfixturevalue(actor))
    for url in ("/api/v1/tenants/", "/api/v1/plans/", "/api/v1/contracts/", "/api/v1/nodes/"):
        assert client.get(url, **headers).status_code == 403


def test_an_api_token_is_stored_hashed_and_dies_with_its_record(client, operator):
    record, token = ApiToken.issue(user=operator, name="grafana")
    assert token not in (record.token_hash, record.token_prefix)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert client.get("/api/v1/plans/", **headers).status_code == 200
    record.delete()
    assert client.get("/api/v1/plans/", **headers).status_code == 401


def test_the_schema_and_docs_are_served_with_local_assets(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/v1/samples" in paths and "/api/v1/tenants/{slug}/usage" in paths
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs
    assert "http://" not in docs.replace("http://testserver", "")
    assert "https://" not in docs
    assets = [a for a in docs.split('"') if a.startswith("/static/")]
    assert assets
    for asset in assets:
        assert Client().get(asset).status_code == 200, asset



def test_the_schema_says_what_each_operators_operation_does(client):
    """Every operation of an operators' viewset, list included, carried the viewset's note
    that deleting what history depends on answers 409."""
    paths = json.loads(client.get("/api/schema/", HTTP_ACCEPT="application/json").content)[
        "paths"]
    contracts = paths["/api/v1/contracts/"]
    assert contracts["get"]["description"].startswith("Operators: the list")
    assert "409" in paths["/api/v1/contracts/{id}/"]["delete"]["description"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            if method != "delete":
                assert "history depends on" not in operation.get("description", ""), (
                    method, path)


def test_every_v1_operation_has_a_summary_and_the_pages_link_the_docs(client, lead):
    """The docs listed bare paths: no v1 operation had a summary, and no page linked them."""
    paths = json.loads(client.get("/api/schema/", HTTP_ACCEPT="application/json").content)[
        "paths"]
    missing = [(method, path) for path, operations in paths.items()
               for method, operation in operations.items()
               if path.startswith("/api/v1/") and not operation.get("summary")]
    assert missing == []
    summary = paths["/api/v1/contracts/{id}/statements"]["get"]["summary"]
    assert summary.startswith("Every statement of a contract") and len(summary) <= 90
    client.force_login(lead)
    page = client.get("/en/tenants/vision/").content.decode()
    assert 'href="/api/docs/" id="api-docs-link"' in page
