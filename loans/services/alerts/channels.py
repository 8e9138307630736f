"""Chat channels through Apprise: one URL a channel (slack://..., workflows://... for Microsoft
Teams, feishu://, lark://, dingtalk://, wecombot://, discord://, tgram://), each said in the
service's own format by Apprise's plugin for it.

Only services whose host the plugin fixes are taken (hooks.slack.com, open.feishu.cn,
oapi.dingtalk.com, qyapi.weixin.qq.com...): a channel must not be a way to make the
application call an address inside its own network. Teams' workflows name their own host, so
it must be one of Microsoft's Power Automate domains. Apprise's generic json://, form:// and
the self-hosted services are refused; the existing webhook (loans.services.alerts.webhooks)
is the way to a receiver of one's own.

Two plugins are told to use their richer format: Slack's Block Kit (Apprise's default is the
older attachments), and WeCom's markdown message (Apprise's plugin sends plain text)."""

from dataclasses import dataclass
from json import dumps

import apprise
import requests
from apprise.plugins.slack import NotifySlack
from apprise.plugins.wecombot import NotifyWeComBot
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.wording import worded
from loans.models import Alert, Channel
from loans.services.alerts.condition import Condition
from loans.services.alerts.webhooks import DeliveryError

# Apprise schema -> whether its host is the user's to choose (then it must match HOSTS).
SERVICES = {
    "slack": False, "workflow": True, "workflows": True, "feishu": False, "lark": False,
    "dingtalk": False, "wecombot": False, "discord": False, "tgram": False,
}
# Microsoft Teams' workflows (Power Automate) answer on these domains only.
HOSTS = (".logic.azure.com", ".powerplatform.com", ".powerautomate.com")
MAX_URL = 2000


class ChannelError(ValueError):
    """The URL is not a channel gpuloans sends to; the text says why, in the reader's
    language."""


@dataclass(frozen=True)
class Parsed:
    url: str
    service: str  # the plugin's own name for its service ("Slack", "DingTalk")
    shown: str  # the URL with its secrets masked, as Apprise renders it for privacy


class WeComMarkdown(NotifyWeComBot):
    """WeCom's group robot, sending its markdown message: the alert's title in bold, the
    body, and the link (WeCom's text message shows neither emphasis nor links)."""

    title_maxlen = 250  # the title reaches send() apart, to be set in bold

    def send(self, body, title="", notify_type=apprise.NotifyType.INFO, **kwargs):
        content = f"**{title}**\n{body}" if title else body
        payload = {"msgtype": "markdown", "markdown": {"content": content}}
        try:
            answer = requests.post(
                self.api_url, data=dumps(payload, ensure_ascii=False).encode(),
                headers={"User-Agent": self.app_id,
                         "Content-Type": "application/json; charset=utf-8"},
                verify=self.verify_certificate, timeout=self.request_timeout,
                allow_redirects=False)
        except requests.RequestException:
            return False
        if answer.status_code != requests.codes.ok:
            return False
        try:  # WeCom refuses with HTTP 200 and a non-zero errcode
            return int(answer.json().get("errcode", 0)) == 0
        except (ValueError, AttributeError, TypeError):
            return True


def _schema(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def plugin(url: str):
    """The Apprise plugin for this URL, or ChannelError."""
    schema = _schema(url)
    if schema not in SERVICES:
        raise ChannelError(_("gpuloans sends to these chat services: %(services)s. For a "
                             "receiver of your own, use the webhook.") % {
            "services": ", ".join(sorted(s + "://" for s in SERVICES))})
    asset = apprise.AppriseAsset(storage_mode="memory")
    if schema == "wecombot":
        found = NotifyWeComBot.parse_url(url)
        try:
            instance = WeComMarkdown(**found, asset=asset) if found else None
        except (TypeError, ValueError, apprise.exception.AppriseException):
            instance = None
    else:
        instance = apprise.Apprise.instantiate(url, asset=asset, suppress_exceptions=True)
    if instance is None:
        raise ChannelError(_("This is not a valid %(schema)s:// URL; see Apprise's page for "
                             "the service.") % {"schema": schema})
    if SERVICES[schema]:
        host = (getattr(instance, "host", "") or "").lower().rstrip(".")
        if not host.endswith(HOSTS):
            raise ChannelError(_("A Teams workflow's host must be one of Microsoft's Power "
                                 "Automate domains (%(hosts)s).") % {"hosts": ", ".join(HOSTS)})
    if isinstance(instance, WeComMarkdown):
        instance.notify_format = apprise.NotifyFormat.MARKDOWN
    # No icon: a message would make its reader's client fetch it from Apprise's repository.
    instance.include_image = False
    if isinstance(instance, NotifySlack):
        instance.use_blocks = True  # Block Kit, not the older attachments
        instance.include_footer = False  # no "Apprise" under every alert
    instance.request_rate_per_sec = 0  # one message an instance: nothing to pace
    return instance


def parse(url: str) -> Parsed:
    """Check a channel URL when it is saved: the service, and what may be shown of it."""
    url = (url or "").strip()
    if not url:
        raise ChannelError(_("Give the channel's Apprise URL."))
    if len(url) > MAX_URL or any(ord(c) < 32 for c in url):
        raise ChannelError(_("This URL is too long or holds control characters."))
    instance = plugin(url)
    return Parsed(url=url, service=str(instance.service_name)[:60],
                  shown=instance.url(privacy=True)[:500])


def send(url: str, title: str, body: str) -> None:
    """Say it in the channel: the title, and the body as markdown (its link included); a
    refusal or no answer raises DeliveryError (the notice is tried again)."""
    try:
        instance = plugin(url)
    except ChannelError:
        raise DeliveryError("channel URL no longer valid") from None
    if not instance.notify(body=body, title=title, body_format=apprise.NotifyFormat.MARKDOWN):
        raise DeliveryError(f"{instance.service_name} did not take the message")


def failing_conditions(_now) -> list[Condition]:
    """The operators' alert for each chat channel whose last message did not go: one alert a
    channel however many messages fail (it resolves once the channel takes one again)."""
    out = []
    for channel in Channel.objects.filter(failing_since__isnull=False).select_related("tenant"):
        owner = channel.tenant.name if channel.tenant else gettext_noop("the operators")
        out.append(Condition(Alert.Kind.CHANNEL_FAILING, f"channel:{channel.pk}", None, worded(
            gettext_noop("The chat channel %(channel)s (%(service)s) of %(owner)s has not "
                         "taken a message since %(since)s UTC: %(error)s. Its messages are "
                         "tried again; check its URL."), {
                "channel": channel.name, "service": channel.service, "owner": owner,
                "since": f"{channel.failing_since:%Y-%m-%d %H:%M}",
                "error": channel.last_error or "-"}),
            {"channel": channel.pk, "failing_since": channel.failing_since.isoformat()}))
    return out
