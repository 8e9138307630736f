"""The pages on a phone (390 x 844): nothing scrolls sideways, wide tables scroll inside
their card, and the header keeps every link on its dark bar."""

from datetime import date, timedelta

import pytest

from loans.models import Channel, Contract, SharingGroup
from loans.services.alerts import channels
from loans.services.alerts.conditions import evaluate_alerts
from loans.services.ledger import sharing
from loans.services.ledger.closing import close_due_periods
from tests.browser.test_dashboard_in_a_browser import log_in
from tests.story import NOW

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7"
WIDTHS = """() => ({page: document.documentElement.scrollWidth, view: window.innerWidth})"""
HEADER = """() => {
  const bar = document.querySelector(".site-header").getBoundingClientRect();
  return [...document.querySelectorAll(".site-header a, .site-header button, .site-header select")]
    .filter(e => e.offsetParent !== null)
    .map(e => { const r = e.getBoundingClientRect();
                return [e.textContent.trim() || e.tagName,
                        r.top >= bar.top - 1 && r.bottom <= bar.bottom + 1
                        && r.left >= bar.left - 1 && r.right <= bar.right + 1]; })
    .filter(([_name, inside]) => !inside).map(([name]) => name);
}"""


@pytest.fixture
def phone(browser):
    context = browser.new_context(locale="en-US", viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.mark.parametrize(("who", "path"), [("lead", "/en/tenants/vision/"),
                                           ("lead", "/en/tenants/vision/?period=all"),
                                           ("operator", "/en/fleet/"),
                                           ("operator", "/zh-hans/alerts/?state=all"),
                                           ("lead", "/zh-hans/tenants/vision/"),
                                           ("operator", "/en/advise/"),
                                           ("lead", "/zh-hans/tokens/"),
                                           ("lead", "/zh-hans/notifications/"),
                                           ("operator", "/en/audit/"),
                                           ("lead", "/zh-hans/tenants/vision/audit/"),
                                           ("operator",
                                            "/zh-hans/admin/loans/contract/{contract}/change/")])
def test_no_page_scrolls_sideways_on_a_phone(live_server, phone, lead, operator, contract,
                                             other_tenant, plan, metered, who, path):
    theirs = Contract.objects.create(tenant=other_tenant, plan=plan,
                                     starts_on=date(2026, 11, 1), status=Contract.Status.ACTIVE)
    group = SharingGroup.objects.create(name="org", currency="CNY")
    for member in (contract, theirs):  # the pool's card and the statements' shared lines
        sharing.join(group, member, by=None, now=NOW - timedelta(days=60))
    close_due_periods(NOW)
    evaluate_alerts(NOW)
    shown = channels.parse(SLACK)  # a long masked URL in the channels' table
    Channel.objects.create(tenant=contract.tenant, name="#gpu-team", url=shown.url,
                           service=shown.service, shown=shown.shown)
    path = path.format(contract=contract.pk)
    log_in(phone, live_server.url, who, path)
    phone.goto(live_server.url + path)
    phone.wait_for_selector("main")
    widths = phone.evaluate(WIDTHS)
    assert widths["page"] <= widths["view"], widths
    if "/admin/" not in path:  # the admin has Django's own header
        assert phone.evaluate(HEADER) == []


INSIDE = """(selector) => [...document.querySelectorAll(selector)].map(e => {
  const r = e.getBoundingClientRect();
  return [e.dataset.label || "", r.width > 0 && r.left >= 0 && r.right <= window.innerWidth];
})"""


@pytest.mark.parametrize(("who", "path", "money"), [
    ("lead", "/en/tenants/vision/", "#statement-list td[data-total]"),
    ("lead", "/en/tenants/vision/", "#periods td.num"),
    ("lead", "/zh-hans/tenants/vision/", "#statement-list td[data-total]"),
    ("operator", "/en/fleet/", "#fleet-table td.num"),
])
def test_money_is_on_screen_on_a_phone_as_labelled_stacked_rows(
        live_server, phone, lead, operator, contract, other_tenant, plan, metered, who, path,
        money):
    """Tables that hold money scrolled sideways inside their card: the statements' totals
    looked blank, the fleet's projected money was out of view. Under 600 px each row is
    stacked, every amount on screen beside its column's name."""
    Contract.objects.create(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                            status=Contract.Status.ACTIVE)
    close_due_periods(NOW)
    path = path.format(contract=contract.pk)
    log_in(phone, live_server.url, who, path)
    phone.goto(live_server.url + path)
    phone.wait_for_selector(money.split(" ")[0])
    cells = phone.evaluate(INSIDE, money)
    assert cells and all(inside for _label, inside in cells), cells
    assert all(label for label, _inside in cells), cells  # each says what it is
    # No chart toolbar on a phone: it covered the charts' titles.
    if who == "lead":
        phone.wait_for_selector("#chart-burndown .main-svg")
        assert phone.locator(".modebar-container .modebar").count() == 0
