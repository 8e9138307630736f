"""The API tokens page: a person lists, issues and revokes their own tokens; operators see and
revoke everyone's; nobody finds another's token."""

from loans.models import ApiToken


def test_a_lead_issues_a_read_token_sees_it_once_and_revokes_it(client, lead):
    client.force_login(lead)
    empty = client.get("/en/tokens/")
    assert empty.status_code == 200 and "No API token yet" in empty.content.decode()
    answer = client.post("/en/tokens/", {"name": "grafana", "scope": "read", "days": 30})
    assert answer.status_code == 200
    token = answer.context["issued"]
    assert token.startswith("gplu_") and token in answer.content.decode()
    again = client.get("/en/tokens/").content.decode()
    assert token not in again and "grafana" in again and ">read<" in again
    record = ApiToken.objects.get()
    assert (record.user, record.scope) == (lead, "read")
    assert client.post(f"/en/tokens/{record.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.exists()


def test_a_bad_form_is_said_and_issues_nothing(client, lead):
    client.force_login(lead)
    answer = client.post("/en/tokens/", {"name": "", "scope": "admin", "days": 0})
    assert answer.status_code == 400
    assert set(answer.context["form"].errors) == {"name", "scope", "days"}
    assert not ApiToken.objects.exists()


def test_nobody_finds_anothers_token_and_operators_revoke_any(client, lead, outsider, operator):
    theirs, _token = ApiToken.issue(user=outsider, name="theirs")
    client.force_login(lead)
    assert "theirs" not in client.get("/en/tokens/").content.decode()
    assert client.post(f"/en/tokens/{theirs.pk}/revoke/").status_code == 404
    assert client.get(f"/en/tokens/{theirs.pk}/revoke/").status_code == 405
    client.force_login(operator)
    page = client.get("/en/tokens/").content.decode()
    assert "theirs" in page and outsider.get_username() in page
    assert client.post(f"/en/tokens/{theirs.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.exists()


def test_the_page_asks_for_a_login(client):
    assert client.get("/en/tokens/").status_code == 302
