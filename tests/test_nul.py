"""NUL in an address, a query or a JSON body is a 400 that says so, on both databases
(PostgreSQL cannot store or compare text holding it: before config/nul.py these were 500s)."""

import pytest

from loans.models import Contract

REFUSED = "Text may not contain the NUL character (\\u0000)."


@pytest.mark.parametrize("url", ["/api/v1/clusters/a%00b/", "/api/v1/tenants/%00/",
                                 "/api/v1/contracts/?tenant=%00", "/api/v1/contracts/?%00=1"])
def test_an_api_address_or_query_holding_nul_is_refused_in_json(client, operator, url):
    client.force_login(operator)
    response = client.get(url, HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": REFUSED}


def test_a_page_address_holding_nul_is_refused_in_text(client, lead, tenant):
    client.force_login(lead)
    response = client.get(f"/tenants/{tenant.slug}%00/")
    assert response.status_code == 400
    assert response.content.decode() == REFUSED


def test_a_json_body_holding_nul_anywhere_is_refused_and_nothing_is_stored(client, operator,
                                                                          tenant, plan):
    client.force_login(operator)
    # The fuzzer's case: the tenant's slug, looked up before any field's validation.
    for body in ({"tenant": f"{tenant.slug}\x00", "plan": plan.pk},
                 {"tenant": tenant.slug, "plan": plan.pk, "notes": ["a", {"b": "c\x00"}]},
                 {"tenant": tenant.slug, "plan": plan.pk, "\x00": 1}):
        response = client.post("/api/v1/contracts/", body, content_type="application/json")
        assert response.status_code == 400, body
        assert response.json() == {"detail": REFUSED}
    assert not Contract.objects.exists()


def test_a_backslash_before_u0000_is_text_not_nul(client, operator, tenant):
    client.force_login(operator)
    body = '{"tenant": "' + tenant.slug + '", "notes": "\\\\u0000"}'  # a backslash, then u0000
    response = client.post("/api/v1/contracts/", body, content_type="application/json")
    assert response.status_code == 400  # refused for the fields it lacks, not for NUL
    assert "plan" in response.json()


def test_the_refusal_is_said_in_chinese(client, operator):
    client.force_login(operator)
    response = client.get("/api/v1/tenants/%00/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.json() == {"detail": "文本不能包含 NUL 字符（\\u0000）。"}
