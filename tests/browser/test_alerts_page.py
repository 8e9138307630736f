"""The operators' alerts page: reached from the fleet's open-alert counts, filtered by state,
kind and tenant, and kept from leads."""

import re
from datetime import timedelta

import pytest
from django.utils.translation import gettext_noop
from playwright.sync_api import expect

from core.wording import worded
from loans.models import Alert
from loans.services.alerts.conditions import evaluate_alerts
from tests.browser.test_dashboard_in_a_browser import log_in
from tests.story import NOW

pytestmark = pytest.mark.browser


def test_an_operator_follows_an_open_alert_count_to_the_alerts_and_filters_them(
        live_server, page, operator, lead, contract, metered):
    evaluate_alerts(NOW)
    idle = worded(gettext_noop("%(count)s GPUs were held for the last hour at under 5%% "
                               "utilisation (%(gpus)s), costing %(money)s %(currency)s an hour."),
                  {"count": 2, "gpus": "GPU-0001, GPU-0002", "money": "20.00", "currency": "CNY"})
    for hours in (0, 1):  # one kind, opened at two moments
        Alert.objects.create(tenant=contract.tenant, kind=Alert.Kind.IDLE_GPUS,
                             subject=f"idle-{hours}", message=idle.english,
                             wording=idle.stored(), opened_at=NOW - timedelta(hours=hours))
    Alert.objects.create(tenant=None, kind=Alert.Kind.NODE_SILENT, subject="node:x",
                         message="Node x has sent nothing for 5 minutes.", opened_at=NOW)
    open_for_vision = Alert.objects.filter(tenant__slug="vision", state="open")
    assert open_for_vision.values("kind").distinct().count() >= 2
    log_in(page, live_server.url, "operator", "/en/fleet/")
    row = page.locator("#fleet-table tr[data-tenant=vision]")
    expect(row.locator("a.open-alerts")).to_have_text(str(open_for_vision.count()))
    row.locator("a.open-alerts").click()
    expect(page).to_have_url(re.compile(r"/en/alerts/\?tenant=vision$"))
    rows = page.locator("#alert-table tbody tr")
    expect(rows).to_have_count(open_for_vision.count())
    first = open_for_vision.order_by("-opened_at", "-pk").first()
    expect(rows.first).to_contain_text(first.text)

    kind = open_for_vision.order_by("kind").first().kind
    counted = page.locator(f"#alert-filters select[name=kind] option[value={kind}]")
    expect(counted).to_contain_text(f"({open_for_vision.filter(kind=kind).count()})")
    page.select_option("#alert-filters select[name=kind]", kind)
    page.click("#alert-filters button")
    expect(rows).to_have_count(open_for_vision.filter(kind=kind).count())
    expect(page.locator("#alert-table tbody tr[data-kind]")).to_have_count(
        open_for_vision.filter(kind=kind).count())

    page.goto(f"{live_server.url}/en/alerts/?kind=nonsense&state=closed&tenant=nobody")
    expect(page.locator("#alerts .error")).to_have_count(3)
    expect(page.locator("#alerts .error").first).to_contain_text("Unknown state closed")
    expect(rows).to_have_count(Alert.objects.filter(state="open").count())

    page.context.clear_cookies()
    log_in(page, live_server.url, "lead", "/en/alerts/")
    expect(page.locator("main")).to_contain_text("This page is for operators.")
