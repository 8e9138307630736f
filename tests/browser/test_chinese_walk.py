"""Every page a lead or an operator reaches, read in zh-hans: no English word shows that is not
a name (of a tenant, plan, node, GPU, user), a unit or a code. Recommendations, alerts and
burst notes, written by jobs that run in no one's language, are said in the reader's."""

import re
from datetime import timedelta

import pytest

from loans.models import Plan, SharingGroup, Tenant
from loans.services import bursts
from loans.services.advice.standalone import refresh_recommendations
from loans.services.alerts.conditions import evaluate_alerts
from loans.services.ledger import sharing
from loans.services.ledger.closing import close_due_periods
from metering.models import Gpu, Node
from tests.browser.test_dashboard_in_a_browser import log_in
from tests.loans.services.test_bursts import pool  # noqa: F401
from tests.story import NOW

pytestmark = pytest.mark.browser

WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]")
# Units, codes and product names that stay as they are in Chinese text.
ALLOWED = {
    "GPU", "GPUs", "MIG", "CSV", "API", "REST", "JSON", "CNY", "USD", "UTC", "ISO", "FOCUS", "PDF",
    "gpuloans", "NVIDIA", "HBM", "SXM", "PCIe", "HGX", "DGX", "Asia", "Shanghai", "Django",
    "Plotly",
    "P10", "P90", "ID", "URL", "Webhook", "webhook", "HTTPS", "HTTP", "Kubernetes", "Slurm",
    "GiB", "MiB", "GB", "TB", "kW", "h", "GPU-h", "English", "Celery", "nvidia-smi", "UUID",
    "IP", "GET", "POST", "Accept", "sha", "LDAP", "Grafana", "Ctrl", "Command", "Mac",
    # Kubernetes' own field names in an owner (namespace=vision), as kubectl writes them.
    "namespace", "pod", "container",
    # Kinds of Kubernetes and Kueue objects, named as the API names them; a URL's scheme.
    "Kueue", "Pod", "Workload", "ResourceQuota", "ClusterQueue", "Secret", "CA", "https",
    # Sign-in protocols and their terms, named as their standards name them.
    "OpenID", "Connect", "OIDC", "DN",
    # Chat services and their Apprise URL schemes, as the services and Apprise name them; a
    # channel's name in an example (#gpu-team).
    "Apprise", "Microsoft", "Teams", "slack", "workflows", "feishu", "lark", "dingtalk",
    "wecombot", "discord", "tgram", "gpu-team",
    # Columns of the history files the advice reads, typed as they are (ts,gpus; sacct's).
    "ts", "gpus", "sacct", "JobID", "Account", "User", "Start", "End", "AllocTRES",
}


def names() -> set[str]:
    """The words of every name the data holds: they are shown as written."""
    from auditlog.models import LogEntry
    from axes.models import AccessLog
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group, Permission

    from loans.models import Alert, ApiToken
    from metering.models import Cluster

    found = set()
    texts = [*Tenant.objects.values_list("slug", "name"), *Plan.objects.values_list("name"),
             *SharingGroup.objects.values_list("name"),
             *Node.objects.values_list("name", "token_prefix"),
             *Gpu.objects.values_list("uuid", "model"), *Cluster.objects.values_list("name"),
             *get_user_model().objects.values_list("username"), *Group.objects.values_list("name"),
             *ApiToken.objects.values_list("name", "token_prefix"),
             # Django writes its permissions' names once, in English, when it migrates.
             *Permission.objects.values_list("name"),
             # Identifiers and what browsers sent, shown as they are.
             *Alert.objects.values_list("subject"),
             *AccessLog.objects.values_list("user_agent", "path_info"),
             # The audit log's objects and values, as they were written.
             *LogEntry.objects.values_list("object_repr"),
             *([str(v) for values in (changes or {}).values() for v in values]
               for changes in LogEntry.objects.values_list("changes", flat=True))]
    for row in texts:
        for text in row:
            found.update(WORD.findall(text or ""))
    return found


# The text a reader sees: rendered text nodes, as written (not as CSS capitalises them),
# leaving out what only screen readers get (Django's own hidden table headings).
SHOWN = """() => {
  const out = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const parent = walk.currentNode.parentElement;
    if (!parent || parent.closest("script, style, template, noscript, .visually-hidden")) continue;
    if (!parent.checkVisibility({visibilityProperty: true})) continue;
    out.push(walk.currentNode.textContent);
  }
  return out.join(" ");
}"""


def english(page) -> set[str]:
    return {w for w in WORD.findall(page.evaluate(SHOWN)) if w not in ALLOWED}


@pytest.fixture
def story(lead, operator, contract, metered, pool):  # noqa: F811
    # vision and speech share a group: the pages show the pool and the lent and borrowed
    # lines, in Chinese too.
    group = SharingGroup.objects.create(name="org", currency="CNY")
    for member in (contract, pool):
        sharing.join(group, member, by=None, now=NOW - timedelta(days=60))
    close_due_periods(NOW)
    refresh_recommendations(NOW)
    evaluate_alerts(NOW)
    bursts.submit(contract=contract, user=lead, gpus=2, starts_at=NOW + timedelta(hours=1),
                  ends_at=NOW + timedelta(hours=9), reason="训练", now=NOW)
    return contract


def test_every_page_reads_chinese_in_zh_hans(live_server, page, story):
    assert story.recommendations.exists() and story.tenant.alerts.exists()
    assert story.statements.filter(sharing_lines__kind="borrowed").exists()
    found = {}

    log_in(page, live_server.url, "lead", "/zh-hans/tenants/vision/")
    page.wait_for_selector("#chart-heatmap .main-svg")
    for path in ["/zh-hans/tenants/vision/", "/zh-hans/tenants/vision/?period=1",
                 "/zh-hans/tenants/vision/?period=all", "/zh-hans/tenants/vision/buy-vs-loan/",
                 "/zh-hans/accounts/password_change/", "/zh-hans/tokens/",
                 "/zh-hans/notifications/",
                 "/zh-hans/tenants/vision/audit/",
                 "/zh-hans/no-such-page/"]:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        found[path] = english(page)
    burst_note = page.goto(live_server.url + "/zh-hans/tenants/vision/")
    assert burst_note.ok
    assert page.locator(".burst-note").first.inner_text() == "已授予：资源池有空余"
    page.context.clear_cookies()

    page.goto(f"{live_server.url}/zh-hans/accounts/login/")
    found["/zh-hans/accounts/login/"] = english(page)
    log_in(page, live_server.url, "operator", "/zh-hans/fleet/")
    page.wait_for_url(re.compile(r"/zh-hans/fleet/"))
    paths = ["/zh-hans/fleet/", "/zh-hans/alerts/", "/zh-hans/alerts/?state=all",
             "/zh-hans/audit/",
             "/zh-hans/advise/",
             "/zh-hans/admin/",
             f"/zh-hans/admin/loans/contract/{story.pk}/change/"]
    page.goto(live_server.url + "/zh-hans/admin/")
    paths += sorted(set(page.eval_on_selector_all(  # every list, and every add form
        "#content-main a[href$='/']", "els => els.map(e => e.pathname)")))
    for path in paths:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        found[path] = english(page)

    page.goto(live_server.url + "/zh-hans/admin/")  # the menu names models, not counts
    assert page.get_by_role("link", name="GPU", exact=True).count() == 1
    assert page.get_by_role("link", name="GPU 数").count() == 0
    allowed = names()  # the logins above wrote access logs too
    left = {path: sorted(words - allowed) for path, words in found.items() if words - allowed}
    assert not left, "\n".join(f"{path}: {' '.join(words)}" for path, words in left.items())
