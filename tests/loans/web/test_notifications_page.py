"""The notifications page: a person's choices, and the chat channels of the tenants they lead
(secrets never shown again), refused with a reason for a bad URL, others' channels unknown."""

import pytest

from loans.models import Alert, Channel, NoticeProfile

# The kinds migration 0037 makes required (tests/conftest.py: required_alerts).
pytestmark = pytest.mark.usefixtures("required_alerts")

SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7"
SECRET = "TIiajkdnlazkcOXrIdevi7"


def add(client, tenant="vision", url=SLACK, name="#gpu", language="en"):
    return client.post("/en/notifications/", {"action": "channel", "tenant": tenant,
                                              "name": name, "url": url, "language": language})


@pytest.mark.django_db
def test_a_lead_adds_a_channel_whose_secret_is_never_shown_again(client, lead):
    client.force_login(lead)
    answer = add(client)
    assert answer.status_code == 302
    channel = Channel.objects.get()
    assert channel.tenant.slug == "vision" and channel.service == "Slack"
    assert channel.url == SLACK and channel.created_by == lead
    page = client.get("/en/notifications/").content.decode()
    assert "#gpu" in page and "Slack" in page and SECRET not in page
    assert channel.shown in page.replace("&amp;", "&")


@pytest.mark.django_db
@pytest.mark.parametrize("url,why", [
    ("json://example.com/hook", "use the webhook"),
    ("workflows://evil.example.com:443/abc/def", "Power Automate"),
    ("slack://", "not a valid slack:// URL"),
    ("slack://T1/A1/" + "x" * 2100, "at most 2000 characters"),
    ("slack://T1\x01/A1/B1", "control characters"),
])
def test_a_bad_channel_url_is_refused_with_why(client, lead, url, why):
    client.force_login(lead)
    answer = add(client, url=url)
    assert answer.status_code == 400
    assert why in answer.content.decode()
    assert not Channel.objects.exists()


@pytest.mark.django_db
def test_a_lead_cannot_add_a_channel_for_another_tenant_or_the_operators(client, lead,
                                                                          other_tenant):
    client.force_login(lead)
    for owner in ("speech", "-", "nope"):
        answer = add(client, tenant=owner)
        assert answer.status_code == 400
    assert not Channel.objects.exists()


@pytest.mark.django_db
def test_a_member_who_leads_nothing_has_no_channel_form(client, member):
    client.force_login(member)
    page = client.get("/en/notifications/").content.decode()
    assert 'id="channel-form"' not in page and 'id="choices-form"' in page
    assert add(client).status_code == 400


@pytest.mark.django_db
def test_operators_add_their_own_channel_and_see_every_one(client, operator, lead, tenant):
    Channel.objects.create(tenant=tenant, name="#team", url=SLACK, service="Slack",
                           shown="slack://T...2/")
    client.force_login(operator)
    assert add(client, tenant="-", name="#ops").status_code == 302
    page = client.get("/en/notifications/").content.decode()
    assert "#team" in page and "#ops" in page
    assert Channel.objects.get(name="#ops").tenant is None


@pytest.mark.django_db
def test_another_leads_channel_cannot_be_removed(client, lead, outsider, other_tenant):
    theirs = Channel.objects.create(tenant=other_tenant, name="#theirs", url=SLACK,
                                    service="Slack", shown="slack://T...2/")
    client.force_login(lead)
    assert client.post(f"/en/notifications/channels/{theirs.pk}/remove/").status_code == 404
    assert "#theirs" not in client.get("/en/notifications/").content.decode()
    client.force_login(outsider)
    assert client.post(f"/en/notifications/channels/{theirs.pk}/remove/").status_code == 302
    assert not Channel.objects.exists()


@pytest.mark.django_db
def test_choices_are_saved_and_shown_in_chinese(client, lead):
    client.force_login(lead)
    page = client.get("/zh-hans/notifications/").content.decode()
    assert "通知" in page and "运维人员设为必收：不能关闭。" in page
    fields = {"action": "choices", "language": "zh-hans", "when_digest": "never",
              "when_statement": "now", "when_idle_gpus": "weekly"}
    answer = client.post("/en/notifications/", fields)
    assert answer.status_code == 400  # every kind must be answered
    fields |= {f"when_{k}": "now" for k in Alert.Kind.values if k != "idle_gpus"}
    assert client.post("/en/notifications/", fields).status_code == 302
    profile = NoticeProfile.objects.get(user=lead)
    assert profile.timings["idle_gpus"] == "weekly" and profile.timings["digest"] == "never"


@pytest.mark.django_db
def test_an_unknown_action_changes_nothing(client, lead):
    client.force_login(lead)
    answer = client.post("/en/notifications/", {"action": "<script>"})
    assert answer.status_code == 400 and b"<script>" not in answer.content
    assert not NoticeProfile.objects.exists()
