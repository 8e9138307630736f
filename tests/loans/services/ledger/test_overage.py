"""A contract's overage policy: set by its lead or an operator on the tenant page, the API and
the admin, kept with who and when; read by whoever may see the contract; what it means in
GPU-hours said beside it. Bad input gets a precise 400, never a 500."""

from decimal import Decimal

import pytest
from django.utils import timezone

from loans.models import Membership, OveragePolicy, policy_of
from tests.conftest import make_user


def url(contract) -> str:
    return f"/api/v1/contracts/{contract.pk}/overage-policy"


def test_a_contract_allows_overage_until_someone_sets_a_policy(client, member, contract):
    client.force_login(member)
    body = client.get(url(contract)).json()
    assert (body["policy"], body["budget"], body["overage_gpu_hours"], body["set_by"]) == (
        "allow", None, None, None)
    assert body["state"] == "open"  # nothing metered yet


def test_a_lead_sets_a_budget_and_sees_what_it_means_in_gpu_hours(client, lead, contract):
    client.force_login(lead)
    answer = client.put(url(contract), {"policy": "budget", "budget": "2000.005"},
                        content_type="application/json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    rate = contract.terms_for(0).overage_rate
    assert body["budget"] == "2000.01"  # to the currency's minor unit
    assert Decimal(body["overage_gpu_hours"]) == pytest.approx(
        Decimal(int(Decimal("2000.01") / rate * 60)) / 60, abs=Decimal("0.000001"))
    assert body["set_by"] == "lead" and body["set_at"]
    client.put(url(contract), {"policy": "hold"}, content_type="application/json")
    assert policy_of(contract) == ("hold", None)
    assert OveragePolicy.objects.filter(contract=contract).count() == 2  # the history is kept


@pytest.mark.parametrize(("body", "field", "text"), [
    ({"policy": "stop"}, "policy", "Choose allow, budget or hold"),
    ({}, "policy", "Choose allow, budget or hold"),
    ({"policy": "budget"}, "budget", "Give the budget"),
    ({"policy": "budget", "budget": "lots"}, "budget", "must be a number"),
    ({"policy": "budget", "budget": "-5"}, "budget", "zero or more"),
    ({"policy": "budget", "budget": "NaN"}, "budget", "zero or more"),
    ({"policy": "budget", "budget": "1e400"}, "budget", "zero or more"),
    ({"policy": ["hold"]}, "policy", "Choose allow, budget or hold"),
])
def test_a_policy_that_cannot_be_is_a_precise_400(client, lead, contract, body, field, text):
    client.force_login(lead)
    answer = client.put(url(contract), body, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert text in " ".join(answer.json()[field])
    assert not OveragePolicy.objects.exists()


def test_only_leads_and_operators_set_it_and_nobody_reads_another_tenants(
        client, member, operator, contract, other_tenant):
    client.force_login(member)
    answer = client.put(url(contract), {"policy": "hold"}, content_type="application/json")
    assert answer.status_code == 403
    client.force_login(operator)
    assert client.put(url(contract), {"policy": "hold"},
                      content_type="application/json").status_code == 200
    outsider = make_user("outsider")  # a lead of another tenant
    Membership.objects.create(user=outsider, tenant=other_tenant, role=Membership.Role.LEAD)
    client.force_login(outsider)
    assert client.get(url(contract)).status_code == 404
    assert client.put(url(contract), {"policy": "allow"},
                      content_type="application/json").status_code == 404


def test_the_tenant_page_says_the_policy_and_its_lead_sets_it_there(client, lead, contract):
    client.force_login(lead)
    page = client.get("/en/tenants/vision/").content.decode()
    assert 'data-policy="allow"' in page and "Overage allowed" in page
    answer = client.post(f"/en/tenants/vision/contracts/{contract.pk}/overage-policy/",
                         {"policy": "budget", "budget": "abc"}, follow=True)
    assert "The budget must be a number" in answer.content.decode()
    answer = client.post(f"/en/tenants/vision/contracts/{contract.pk}/overage-policy/",
                         {"policy": "hold"}, follow=True)
    html = answer.content.decode()
    assert "Overage policy saved" in html and 'data-policy="hold"' in html
    assert "Set by lead" in html
    zh = client.get("/zh-hans/tenants/vision/").content.decode()
    assert "超额策略" in zh


def test_the_fleet_page_says_each_contracts_policy_and_whether_it_is_held(client, operator,
                                                                         contract):
    client.force_login(operator)
    OveragePolicy.objects.create(contract=contract, kind="hold", set_at=timezone.now())
    page = client.get("/en/fleet/").content.decode()
    assert 'data-tenant="vision" data-admission="open"' in page
    assert "holds at the commitment" in page
