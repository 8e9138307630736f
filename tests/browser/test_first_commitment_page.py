"""The page of manage.py advise --history: an operator (or a lead of a tenant without a
contract) gives a usage file and reads each plan priced over a term, and a file it cannot use
is answered row by row."""

import re
from decimal import Decimal

import pytest
from playwright.sync_api import expect

from loans.models import Plan
from tests.browser.test_dashboard_in_a_browser import log_in
from tests.loans.services.advice.test_first_commitment import catalogue, hourly_csv  # noqa: F401

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


def send_gappy_history(page, base: str, language: str, folder) -> None:
    """An operator sends 40 days of history with one hour missing, where the only plan
    offered has a commitment (no on-demand price): the page refuses it and keeps the file."""
    Plan.objects.create(name="Guaranteed 8", base_quota_gpus=8, max_quota_gpus=16,
                        committed_gpu_hours=Decimal(4000), committed_rate=Decimal(10),
                        overage_rate=Decimal(15), term_months=12, currency="CNY")
    gappy = folder / "gappy.csv"
    gappy.write_text(hourly_csv(24 * 40, skip={30}))
    log_in(page, base, "operator", f"/{language}/advise/")
    page.set_input_files("#id_history", str(gappy))
    page.click("#advise-form button[type=submit]")


def test_with_no_on_demand_plan_the_defaults_advise_and_a_refused_file_is_kept(
        live_server, page, operator, tmp_path):
    """The page's defaults refused every upload where no plan without a commitment was
    offered, and cleared the chosen file: now on demand is priced at the dearest overage rate
    (said so), and a file the page refused is used again without choosing it again."""
    send_gappy_history(page, live_server.url, "en", tmp_path)
    expect(page.locator("#history-problems li").first).to_contain_text(
        "(1 hour): give it (0 where nothing ran), or read it as idle (tick “Read hours "
        "without a row as idle”)")
    expect(page.locator("#kept-file")).to_contain_text("gappy.csv is kept for your next try")
    page.check("#id_gaps_as_idle")
    page.click("#advise-form button[type=submit]")  # no file chosen again
    expect(page.locator("#advice-table tbody tr")).to_have_count(2)
    expect(page.locator("#on-demand-note")).to_contain_text("15.00 CNY a GPU-hour")
