"""The page of manage.py advise --history: an operator (or a lead of a tenant without a
contract) gives a usage file and reads each plan priced over a term, and a file it cannot use
is answered row by row."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_dashboard_in_a_browser import log_in
from tests.loans.test_first_commitment import catalogue, hourly_csv  # noqa: F401

pytestmark = pytest.mark.browser


def test_an_operator_gives_a_history_and_reads_the_advice(live_server, page, operator,
                                                          catalogue, tmp_path):  # noqa: F811
    good = tmp_path / "usage.csv"
    good.write_text(hourly_csv(24 * 60, lambda k: 6 + (k % 24 >= 9) * 4))
    log_in(page, live_server.url, "operator", "/en/fleet/")
    page.click("#advise-link")
    expect(page).to_have_url(re.compile(r"/en/advise/$"))
    page.set_input_files("#id_history", str(good))
    page.click("#advise-form button[type=submit]")
    rows = page.locator("#advice-table tbody tr")
    expect(rows).to_have_count(3)  # on demand and two plans
    expect(page.locator("#advice-table tr.advised")).to_have_attribute("data-option",
                                                                        "Guaranteed 8")
    expect(page.locator("tr[data-option='Small 2']")).to_contain_text("below the peak")

    bad = tmp_path / "bad.csv"
    bad.write_text("ts,gpus\n2026-08-01T00:00:00Z,4\n2026-08-01T01:00:00Z,lots\n")
    page.set_input_files("#id_history", str(bad))
    page.click("#advise-form button[type=submit]")
    expect(page.locator("#history-problems li").first).to_have_text(
        "line 3: gpus 'lots' is not a number of GPUs from 0 to 1,000,000")


def test_a_lead_of_a_tenant_without_a_contract_is_led_to_it(live_server, page, lead):
    log_in(page, live_server.url, "lead", "/zh-hans/tenants/vision/")
    page.click("#first-commitment")
    expect(page).to_have_url(re.compile(r"/zh-hans/tenants/vision/advise/$"))
    expect(page.locator("h1")).to_have_text("首次签约建议")
