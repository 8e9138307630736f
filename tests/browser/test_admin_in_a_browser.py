import re
from datetime import date
from decimal import Decimal

import pytest
from playwright.sync_api import expect

from loans.models import Contract
from loans.services.ledger.closing import close_due_periods
from metering.models import Node
from tests.conftest import PASSWORD
from tests.story import NOW

pytestmark = pytest.mark.browser


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_an_operator_sees_contract_figures_and_issues_a_token_once(live_server, page, operator,
                                                                      contract):
    log_in(page, live_server.url, "operator")
    expect(page.locator("#site-name")).to_have_text("gpuloans")
    page.goto(f"{live_server.url}/admin/loans/contract/")
    expect(page.locator("td.field-used_of_committed")).to_have_text("0.0 / 1,000 (0%)")
    expect(page.locator("td.field-cost_so_far")).to_have_text("10,000.00 CNY")

    page.goto(f"{live_server.url}/admin/metering/node/add/")
    page.fill("#id_name", "gpu-node-42")
    page.click("input[name=_save]")
    token = page.locator("code.node-token").inner_text()
    assert Node.objects.by_token(token) == Node.objects.get(name="gpu-node-42")
    page.goto(f"{live_server.url}/admin/metering/node/")
    expect(page.get_by_text(token)).to_have_count(0)


def test_the_language_switch_turns_the_console_chinese_and_back(live_server, page, operator):
    log_in(page, live_server.url, "operator")
    page.select_option("#language-switch", "zh-hans")
    page.click(".language-switch button")
    expect(page).to_have_url(re.compile(r"/zh-hans/admin/$"))
    expect(page).to_have_title("运维 | gpuloans")
    expect(page.get_by_role("link", name="用量样本")).to_be_visible()
    page.select_option("#language-switch", "en")
    page.click(".language-switch button")
    expect(page).to_have_title("Operations | gpuloans")


def test_a_team_lead_is_kept_out_of_the_console(live_server, page, lead):
    log_in(page, live_server.url, "lead")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/admin/login/"))


ICON = """() => {
    const link = document.querySelector("link[rel=icon]");
    return link ? link.href : location.origin + "/favicon.ico";
}"""


def test_every_kind_of_page_shows_the_product_icon(live_server, page, operator):
    """Pages that name their icon, and those that do not (the browsable API), where browsers
    ask for /favicon.ico."""
    log_in(page, live_server.url, "operator")
    for path in ("/admin/", "/en/fleet/", "/api/v1/"):
        page.goto(f"{live_server.url}{path}")
        icon = page.request.get(page.evaluate(ICON))
        assert icon.ok, (path, icon.status)
        assert icon.headers["content-type"].startswith("image/svg+xml"), path
        assert b"<svg" in icon.body()


def test_the_console_tells_the_truth_about_tokens_currencies_and_capacity(
        live_server, page, operator, tenant, plan):
    """The node token page's command lacked --node (following it answered 403), a first token
    said that issuing it stopped the old one, a plan in "XYZ" was saved, and a contract that
    guaranteed more GPUs than the fleet holds was saved without a word."""
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/metering/node/add/")
    page.fill("#id_name", "gpu-node-42")
    page.click("input[name=_save]")
    expect(page.locator("#node-command")).to_contain_text("--node gpu-node-42")
    expect(page.locator("#content")).not_to_contain_text("stop working")
    node = Node.objects.get(name="gpu-node-42")
    page.goto(f"{live_server.url}/admin/metering/node/{node.pk}/token/rotate/")
    page.click("#content form input[type=submit]")
    expect(page.locator("#content")).to_contain_text("The tokens they replace stopped working.")

    page.goto(f"{live_server.url}/admin/loans/plan/{plan.pk}/change/")
    page.fill("#id_currency", "XYZ")
    page.click("input[name=_save]")
    expect(page.locator(".errorlist")).to_contain_text("XYZ is not an ISO 4217 currency code")

    # No H100 has reported: signing a contract that guarantees 8 of them is past capacity.
    draft = Contract.objects.create(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1),
                                    time_zone="Asia/Shanghai", status=Contract.Status.DRAFT)
    page.goto(f"{live_server.url}/admin/loans/contract/{draft.pk}/change/")
    page.select_option("#id_status", "active")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist .warning")).to_contain_text(
        "Base quotas now guarantee 8 NVIDIA H100 80GB HBM3 GPUs, more than the 0 that reported")


def test_statements_read_as_the_pages_write_numbers_and_a_contract_shows_its_end(
        live_server, page, operator, lead, contract, metered):
    """The statement list showed 1000.000000 and completeness 1.0000; the tenant page did not
    say when its contract ends."""
    close_due_periods(NOW)
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/loans/statement/")
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("td.field-committed")).to_have_text("1,000.0")
    expect(row.locator("td.field-complete")).to_have_text(re.compile(r"^\d{1,3}\.\d%$"))
    expect(row.locator("td.field-total")).to_have_text(
        re.compile(r"^\d{1,3}(,\d{3})*\.\d\d CNY$"))
    expect(page.locator("#result_list")).not_to_contain_text("000000")
    # Its page said period 0 and 1000.000000 too.
    row.locator("th a, td a").first.click()
    expect(page.locator(".field-number .readonly")).to_have_text("1")
    expect(page.locator(".field-committed_gpu_hours .readonly")).to_have_text("1,000.0")
    expect(page.locator(".field-completeness .readonly")).to_have_text(re.compile(r"%$"))
    expect(page.locator("#content")).not_to_contain_text("000000")

    page.goto(f"{live_server.url}/en/tenants/vision/")
    expect(page.locator("#contract-end")).to_have_text("in force until 2027-11-01 00:00")


def test_plans_read_as_the_pages_write_numbers_in_the_list_and_the_form(live_server, page,
                                                                       operator, contract):
    """The plan list showed 1000.000000 GPU-hours, 10.0000 a GPU-hour and a multiplier of
    1.200; its form held 11000.000000 in its inputs."""
    contract.plan.committed_gpu_hours = Decimal("11000")
    contract.plan.overage_rate = Decimal("12.3456")
    contract.plan.save()
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/loans/plan/")
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("td.field-committed_gpu_hours")).to_have_text("11,000.0")
    expect(row.locator("td.field-committed_rate")).to_have_text("10.00")
    # One column says which overage rate applies: the one given, not 10 x 1.2.
    expect(row.locator("td.field-overage_applied")).to_have_text("12.3456 (the rate given)")
    expect(page.locator("#result_list")).not_to_contain_text("0000")

    page.goto(f"{live_server.url}/admin/loans/plan/{contract.plan.pk}/change/")
    expect(page.locator("#id_committed_gpu_hours")).to_have_value("11000")
    expect(page.locator("#id_overage_multiplier")).to_have_value("1.2")
    page.click("input[name=_save]")  # the plain value saves as the same number
    expect(page.locator(".messagelist .success")).to_be_visible()
    contract.plan.refresh_from_db()
    assert contract.plan.committed_gpu_hours == Decimal("11000")
