"""Chat channels: each service's request captured at the HTTP layer (responses patches
requests' adapter: Apprise's own code builds and sends it, nothing leaves the machine) and
checked for the payload the service publishes; a channel answering 500 is tried again from
the outbox, its alert sent once, and the operators alerted once however often it fails."""

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
import responses
import time_machine

from core.wording import worded
from loans.models import Alert, Channel, Notice
from loans.services.alerts import channels, delivery, notices
from loans.services.alerts.conditions import COMMITMENT_USED, _apply

NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7"
TEAMS = "workflows://prod-01.westus.logic.azure.com:443/a1b2c3d4e5f6/sigSECRETsig"
FEISHU = "feishu://feishuSECRETtoken1234"
LARK = "lark://larkSECRETtoken1234"
DINGTALK = "dingtalk://dingtalkSECRETtoken1234"
WECOM = "wecombot://wecomSECRETkey1234"
ANY = re.compile(r"https://.*")


def check_channels(now):
    """The alert run, on the channels' conditions only (the test's own alert has none)."""
    return _apply(channels.failing_conditions(now),
                  Alert.objects.filter(state="open", kind=Alert.Kind.CHANNEL_FAILING), now)


def ok_for(request):
    # Slack's webhook answers "ok"; the Chinese services a JSON errcode of 0.
    body = "ok" if "slack.com" in request.url else '{"errcode": 0, "code": 0, "StatusCode": 0}'
    return 200, {}, body


def channel(tenant, url, language="en", name="#gpu"):
    parsed = channels.parse(url)
    return Channel.objects.create(tenant=tenant, name=name, url=parsed.url,
                                  service=parsed.service, shown=parsed.shown, language=language)


def alert(tenant, kind=Alert.Kind.COMMITMENT_USED, subject="contract:1:period:1:used"):
    said = worded(COMMITMENT_USED[("allow", "early")], {
        "tenant": "Vision Lab", "used": 80.0, "committed": "1000", "period": 2})
    return Alert.objects.create(tenant=tenant, kind=kind, subject=subject,
                                message=said.english, wording=said.stored(), opened_at=NOW)


def sent_to(channel_row, tenant, event="opened"):
    """Tell the channel of a new alert and capture the one request it makes."""
    with responses.RequestsMock() as http:
        http.add_callback(responses.POST, ANY, callback=ok_for)
        notices.for_alert(alert(tenant), event, NOW)
        assert delivery.deliver_due(NOW) == (1, 0)
        assert len(http.calls) == 1
        return http.calls[0].request


@pytest.mark.parametrize("url", [
    "json://example.com/hook", "http://10.0.0.1/", "mailto://a@b.c", "ntfy://host/topic",
    "workflows://evil.example.com:443/a1b2c3d4e5f6/sig", "slack://", "slack",
    "wecombot://", "", " ", "slack://T1/A1/" + "x" * 3000, "slack://T1\n/A1/B1",
])
def test_urls_that_are_not_a_fixed_services_channel_are_refused(url):
    with pytest.raises(channels.ChannelError):
        channels.parse(url)


@pytest.mark.parametrize("url,secret", [
    (SLACK, "TIiajkdnlazkcOXrIdevi7"), (TEAMS, "sigSECRETsig"), (FEISHU, "feishuSECRETtoken"),
    (LARK, "larkSECRETtoken"), (DINGTALK, "dingtalkSECRETtoken"), (WECOM, "wecomSECRETkey"),
])
def test_what_is_shown_of_a_channel_masks_its_secret(url, secret):
    parsed = channels.parse(url)
    assert secret not in parsed.shown
    assert parsed.shown.split("://")[0].rstrip("s") == url.split("://")[0].rstrip("s")


def test_slack_gets_block_kit_with_the_title_the_text_and_the_link(db, tenant):
    body = json.loads(sent_to(channel(tenant, SLACK), tenant).body)
    blocks = body["attachments"][0]["blocks"]
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"] == {"type": "plain_text", "emoji": True,
                                 "text": "[gpuloans] Vision Lab: commitment used"}
    section = blocks[1]
    assert section["type"] == "section" and section["text"]["type"] == "mrkdwn"
    assert "used 80% of the 1000 GPU-h" in section["text"]["text"]
    # Slack's link syntax, to the tenant's page
    assert "<http://testserver.example/en/tenants/vision/|Open the page>" in section["text"][
        "text"]
    assert "icon_url" not in body  # nothing fetched from the internet by the reader's client


def test_teams_gets_an_adaptive_card(db, tenant):
    request = sent_to(channel(tenant, TEAMS), tenant)
    assert request.url.startswith("https://prod-01.westus.logic.azure.com:443/workflows/")
    attachment = json.loads(request.body)["attachments"][0]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard"
    texts = [b["text"] for b in card["body"] if b["type"] == "TextBlock"]
    assert texts[0] == "[gpuloans] Vision Lab: commitment used"
    assert "[Open the page](http://testserver.example/en/tenants/vision/)" in texts[1]


def test_feishu_gets_an_interactive_card_in_chinese(db, tenant):
    request = sent_to(channel(tenant, FEISHU, language="zh-hans"), tenant)
    assert request.url == "https://open.feishu.cn/open-apis/bot/v2/hook/feishuSECRETtoken1234/"
    body = json.loads(request.body)
    assert body["msg_type"] == "interactive"
    assert body["card"]["header"]["title"]["tag"] == "plain_text"
    assert body["card"]["header"]["title"]["content"] == "[gpuloans] Vision Lab: 承诺用量"
    element = body["card"]["elements"][0]["text"]
    assert element["tag"] == "lark_md"
    assert "(http://testserver.example/zh-hans/tenants/vision/)" in element["content"]
    assert "[打开页面]" in element["content"]
    assert "Vision Lab 已用掉第 2 账期承诺的 1000 GPU 小时中的 80%。" in element["content"]


def test_dingtalk_gets_a_markdown_message(db, tenant):
    request = sent_to(channel(tenant, DINGTALK), tenant)
    assert request.url.startswith("https://oapi.dingtalk.com/robot/send?access_token=")
    body = json.loads(request.body)
    assert body["msgtype"] == "markdown"
    assert body["markdown"]["title"] == "[gpuloans] Vision Lab: commitment used"
    assert "used 80% of the 1000 GPU-h" in body["markdown"]["text"]
    assert "[Open the page](http://testserver.example/en/tenants/vision/)" in body[
        "markdown"]["text"]


def test_wecom_gets_a_markdown_message_in_chinese(db, tenant):
    request = sent_to(channel(tenant, WECOM, language="zh-hans"), tenant)
    assert request.url == "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=wecomSECRETkey1234"
    body = json.loads(request.body)
    assert body["msgtype"] == "markdown"
    content = body["markdown"]["content"]
    assert content.startswith("**[gpuloans] Vision Lab: 承诺用量**\n")
    assert "[打开页面](http://testserver.example/zh-hans/tenants/vision/)" in content
    assert "已用掉第 2 账期" in content


def test_a_resolved_alert_says_so(db, tenant):
    body = json.loads(sent_to(channel(tenant, DINGTALK), tenant, event="resolved").body)
    assert body["markdown"]["title"] == "[gpuloans] Vision Lab: resolved"


def test_a_tenants_channel_hears_only_its_own_tenants_alerts(db, tenant, other_tenant):
    channel(tenant, SLACK)
    theirs = channel(other_tenant, DINGTALK)
    made = notices.for_alert(alert(tenant), "opened", NOW)
    assert theirs.pk not in {n.channel_id for n in made}
    operators = channel(None, FEISHU)
    made = notices.for_alert(alert(None, Alert.Kind.NODE_SILENT, "node:n1"), "opened", NOW)
    assert [n.channel_id for n in made] == [operators.pk]


def test_a_channel_answering_500_is_tried_again_and_its_alert_sent_once(db, tenant):
    """Three refusals, then it takes it: four requests, one message delivered, nothing after;
    the operators' alert opened once over the three failures and resolved after."""
    row = channel(tenant, DINGTALK)
    answers = iter([500, 500, 500, 200, 200, 200])

    def answer(request):
        return next(answers), {}, '{"errcode": 0}'

    with responses.RequestsMock() as http, time_machine.travel(NOW, tick=False) as clock:
        http.add_callback(responses.POST, ANY, callback=answer)
        notices.for_alert(alert(tenant), "opened", NOW)
        opened = []
        for _try in range(3):
            now = datetime.now(UTC)
            assert delivery.deliver_due(now) == (0, 1)
            assert delivery.deliver_due(now) == (0, 0)  # it waits its turn
            opened += check_channels(now).opened
            clock.shift(timedelta(hours=1))
        row.refresh_from_db()
        assert row.failing_since == NOW and "did not take" in row.last_error
        assert [(a.kind, a.subject) for a in opened] == [("channel_failing", f"channel:{row.pk}")]
        assert opened[0].tenant is None and "#gpu" in opened[0].message
        now = datetime.now(UTC)
        assert delivery.deliver_due(now) == (1, 0)
        assert delivery.deliver_due(now + timedelta(days=1)) == (0, 0)
        assert len(http.calls) == 4
        notice = Notice.objects.get(channel=row)
        assert notice.sent_at == now and notice.attempts == 3
        row.refresh_from_db()
        assert row.failing_since is None
        resolved = check_channels(now).resolved
        assert [a.subject for a in resolved] == [f"channel:{row.pk}"]


def test_the_retry_wait_doubles_to_an_hour(db, tenant):
    row = channel(tenant, SLACK)
    with responses.RequestsMock() as http:
        http.add(responses.POST, ANY, status=500)
        notices.for_alert(alert(tenant), "opened", NOW)
        waits, now = [], NOW
        for _try in range(9):
            assert delivery.deliver_due(now) == (0, 1)
            notice = Notice.objects.get(channel=row)
            waits.append((notice.next_attempt_at - now).total_seconds())
            now = notice.next_attempt_at
    assert waits == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_a_notice_given_up_after_the_last_try_is_not_sent(db, tenant, settings):
    settings.NOTICE_MAX_ATTEMPTS = 2
    channel(tenant, SLACK)
    with responses.RequestsMock() as http:
        http.add(responses.POST, ANY, status=500)
        notices.for_alert(alert(tenant), "opened", NOW)
        assert delivery.deliver_due(NOW) == (0, 1)
        assert delivery.deliver_due(NOW + timedelta(hours=1)) == (0, 1)
        assert delivery.deliver_due(NOW + timedelta(days=2)) == (0, 0)
        assert len(http.calls) == 2


def test_an_event_told_twice_makes_one_notice(db, tenant):
    channel(tenant, SLACK)
    made = alert(tenant)
    notices.for_alert(made, "opened", NOW)
    notices.for_alert(made, "opened", NOW)
    assert Notice.objects.filter(alert=made).count() == 1


@pytest.fixture(autouse=True)
def _site(settings):
    settings.SITE_URL = "http://testserver.example"
