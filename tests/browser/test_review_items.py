"""What a new user tripped on (issue 36), walked in chromium on a desktop and a phone, in
English and Chinese where words are involved: the items whose fixes were first tested
through Django's client get a browser walk here."""

import csv
import io
import re
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.core.management import call_command
from playwright.sync_api import expect

from loans.demo import DEMO_PASSWORD
from loans.models import Contract
from loans.services.ledger.closing import close_due_periods
from tests.browser.test_dashboard_in_a_browser import ask_backwards, log_in
from tests.browser.test_first_commitment_page import send_gappy_history
from tests.browser.test_phone import PHONE
from tests.loans.web.test_pages import report_one_minute
from tests.story import NOW
from tests.test_admin import MOMENT, fleet, stray_usage  # noqa: F401

pytestmark = pytest.mark.browser

VIEWPORTS = pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])


@pytest.fixture
def open_page(browser):
    contexts = []

    def opened(viewport):
        context = browser.new_context(locale="en-US",
                                      **({"viewport": viewport} if viewport else {}))
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        return page

    yield opened
    for context in contexts:
        context.close()


@VIEWPORTS
@pytest.mark.parametrize(("language", "summary"), [("en", "Create a sharing group"),
                                                   ("zh-hans", "创建共享组")])
def test_item_12_the_header_leads_to_the_api_docs_in_the_pages_language(
        live_server, open_page, lead, contract, viewport, language, summary):
    """The docs were English-only and no page linked them."""
    page = open_page(viewport)
    log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/")
    page.click("#api-docs-link")
    expect(page.locator(".opblock-summary-description", has_text=summary).first).to_be_visible()
    if language == "zh-hans":
        expect(page.locator(".info .title")).to_contain_text("gpuloans API 文档")


@VIEWPORTS
def test_item_4_the_admins_recent_actions_and_history_read_chinese(
        live_server, open_page, operator, contract, viewport):
    """An operator working in English left "vision / H100 Guaranteed 8 from 2026-11-01" and
    "Changed Notes." behind, and a Chinese console showed them so."""
    page = open_page(viewport)
    log_in(page, live_server.url, "operator", f"/en/admin/loans/contract/{contract.pk}/change/")
    page.fill("#id_notes", "Renewal talks in January.")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")

    page.goto(f"{live_server.url}/zh-hans/admin/")
    recent = page.locator("#recent-actions-module li").first
    expect(recent).to_contain_text("vision / H100 Guaranteed 8，自 2026-11-01 起")
    expect(recent).not_to_contain_text(" from ")
    page.goto(f"{live_server.url}/zh-hans/admin/loans/contract/{contract.pk}/history/")
    expect(page.locator("#change-history td").last).to_have_text("已修改备注。")

    page.goto(f"{live_server.url}/en/admin/loans/contract/{contract.pk}/history/")
    expect(page.locator("#change-history td").last).to_have_text("Changed Notes.")


@VIEWPORTS
@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.usefixtures("fleet")
def test_item_2_the_fleets_move_link_opens_the_form_with_its_dates_and_gpus_are_whole(
        live_server, open_page, operator, viewport, language):
    """The admin form opened with From and Until empty (and a "hours behind server time"
    note); the capacity table said "8.0" physical GPUs beside "4" guaranteed (item 12)."""
    with time_machine.travel(MOMENT, tick=False):
        stray_usage()
        page = open_page(viewport)
        log_in(page, live_server.url, "operator", f"/{language}/fleet/")
        physical = page.locator("#capacity tbody tr").first.locator("td").nth(1)
        expect(physical).to_have_text(re.compile(r"^\d+$"))
        page.click("#reattribute")
        expect(page.locator("#id_scope")).to_have_value("unattributed")
        for field in ("start", "end"):
            expect(page.locator(f"#id_{field}_0")).not_to_have_value("")
            expect(page.locator(f"#id_{field}_1")).not_to_have_value("")
        # The day MOMENT falls on, as the pages write it in both languages (Django's
        # Chinese admin wrote 2026/11/20).
        expect(page.locator("#id_end_0")).to_have_value("2026-11-20")


@VIEWPORTS
@pytest.mark.parametrize(("language", "committed", "unused"), [
    ("en", "Committed to date", "Unused in ended periods"),
    ("zh-hans", "截至目前的承诺", "已结束账期中未用")])
def test_item_6_whole_contract_figures_say_what_they_count(
        live_server, open_page, lead, contract, metered, viewport, language, committed, unused):
    """"Committed 16,000" was to date, not the term's 48,000, and "Unused" counted the open
    period's hours still left."""
    page = open_page(viewport)
    log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/?period=all")
    totals = page.locator("#key-figures")
    expect(totals.locator("[data-figure=committed]")).to_be_visible()
    expect(totals).to_contain_text(committed)
    expect(totals).to_contain_text(unused)
    expect(totals).to_contain_text("12,000")  # the term's 12 periods of 1,000 GPU-h


@VIEWPORTS
@pytest.mark.parametrize(("language", "amend", "terminate"), [
    ("en", "Amend the terms", "Terminate early"), ("zh-hans", "修订条款", "提前终止")])
def test_item_10_a_signed_contract_offers_amend_and_terminate_not_delete(
        live_server, open_page, operator, contract, viewport, language, amend, terminate):
    page = open_page(viewport)
    log_in(page, live_server.url, "operator",
           f"/{language}/admin/loans/contract/{contract.pk}/change/")
    expect(page.locator("a.deletelink")).to_have_count(0)
    page.get_by_role("link", name=terminate).click()
    expect(page.locator("#id_terminate")).to_be_checked()
    page.go_back()
    page.get_by_role("link", name=amend).click()
    expect(page.locator("#id_contract")).to_have_value(str(contract.pk))
    expect(page.locator("#id_terminate")).not_to_be_checked()


@VIEWPORTS
def test_item_11_the_periods_csv_says_stated_and_writes_each_column_at_its_precision(
        live_server, open_page, lead, contract, metered, viewport):
    """The state column said "closed" where the page says "stated"; numbers mixed `0`,
    `0.000000` and `1808.000000`."""
    close_due_periods(NOW + timedelta(days=30))
    page = open_page(viewport)
    log_in(page, live_server.url, "lead", "/en/tenants/vision/")
    with page.expect_download() as download:
        page.click("#periods-csv")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert [row["state"] for row in rows][:1] == ["stated"]
    for row in rows:
        for name, value in row.items():
            if name.endswith("gpu_hours") and value:
                assert re.fullmatch(r"-?\d+(\.\d{1,3})?", value), (name, value)


@VIEWPORTS
@pytest.mark.parametrize(("language", "covers"), [("en", "since its first report, "),
                                                  ("zh-hans", "首次上报起")])
def test_item_12_a_new_node_says_what_its_completeness_covers(
        live_server, open_page, client, operator, frozen, viewport, language, covers):
    """A node that had reported for one minute read "Completeness, 24 h 100.0%"."""
    report_one_minute(client)
    page = open_page(viewport)
    log_in(page, live_server.url, "operator", f"/{language}/fleet/")
    expect(page.locator(".measured-from")).to_contain_text(covers)


@VIEWPORTS
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_item_5_the_demos_first_period_is_whole_and_signed_before_it_began(
        live_server, open_page, db, viewport, language):
    """The demo's data began 2026-09-05 while every contract began 2026-08-16: each first
    period read 35.2% complete, and vision, "heading for overage", showed 2,192 GPU-h "paid
    for, not used"."""
    call_command("seed_demo", "--days", "40", stdout=io.StringIO())
    call_command("close_periods", stdout=io.StringIO())  # as make demo does
    vision = Contract.objects.get(tenant__slug="vision")
    assert vision.signed_at < vision.window_start
    page = open_page(viewport)
    log_in(page, live_server.url, "vision-lead", f"/{language}/tenants/vision/?period=1",
           password=DEMO_PASSWORD)
    first = page.locator("#statements tr[data-period='1']")
    expect(first.locator("td.num").last).to_contain_text("100")
    expect(page.locator("[data-figure=unused-money]")).to_have_count(0)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_item_1_on_a_phone_a_refused_history_is_kept_and_the_error_names_the_checkbox(
        live_server, open_page, operator, tmp_path, language):
    """The error named a CLI flag (--gaps-as-idle), said "1 hours", and the chosen file was
    cleared (the desktop walk in English: tests/browser/test_first_commitment_page.py)."""
    page = open_page(PHONE)
    send_gappy_history(page, live_server.url, language, tmp_path)
    problem, kept = {
        "en": ("(1 hour): give it (0 where nothing ran), or read it as idle (tick “Read "
               "hours without a row as idle”)", "gappy.csv is kept for your next try"),
        "zh-hans": ("（1 小时）：请补上（无运行处填 0），或视为闲置"
                    "（勾选“没有记录的小时视为闲置”）",
                    "gappy.csv 已为下次尝试保留")}[language]
    expect(page.locator("#history-problems li").first).to_contain_text(problem)
    expect(page.locator("#history-problems")).not_to_contain_text("--gaps-as-idle")
    expect(page.locator("#kept-file")).to_contain_text(kept)
    page.check("#id_gaps_as_idle")
    page.click("#advise-form button[type=submit]")
    expect(page.locator("#advice-table tbody tr")).to_have_count(2)


@pytest.mark.parametrize(("language", "most", "refused"), [
    ("en", "at most 8", "The end must be after the start."),
    ("zh-hans", "最多 8 块", "结束时间必须晚于开始时间。")])
def test_item_7_on_a_phone_the_burst_form_says_the_most_that_fits_and_keeps_a_refusal(
        live_server, open_page, lead, contract, language, most, refused):
    """The GPU field took 100000 where 8 more fit, and a refused form came back empty."""
    page = open_page(PHONE)
    log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/")
    form = page.locator(".burst-form")
    expect(form).to_contain_text(most)
    expect(form.locator("input[name=gpus]")).to_have_attribute("max", "8")
    ask_backwards(form)
    expect(page.locator("#bursts .error")).to_contain_text(refused)
    expect(form.locator("input[name=reason]")).to_have_value("ablation sweep")


@pytest.mark.parametrize(("language", "loading"), [("en", "Loading the chart…"),
                                                   ("zh-hans", "图表加载中…")])
def test_item_8_on_a_phone_each_chart_box_says_it_is_loading(
        live_server, open_page, lead, contract, metered, language, loading):
    page = open_page(PHONE)
    log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/")
    page.route("**/plotly-cartesian.min.js", lambda route: route.abort())
    page.goto(f"{live_server.url}/{language}/tenants/vision/")
    for chart in ("chart-burndown", "chart-cumulative", "chart-hourly"):
        expect(page.locator(f"#{chart} .loading")).to_have_text(loading)


@pytest.mark.parametrize(("language", "ended", "stated"), [
    ("en", "Final figures: this period ended with 2026-11-30", "stated 2026-12-"),
    ("zh-hans", "最终数据：本账期截至 2026-11-30（含当日）", "出账于 2026-12-")])
def test_item_9_on_a_phone_a_closed_period_names_its_last_day_and_when_it_was_stated(
        live_server, open_page, lead, contract, metered, language, ended, stated):
    close_due_periods(NOW)
    page = open_page(PHONE)
    log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/?period=1")
    expect(page.locator("#period-state")).to_contain_text(ended)
    expect(page.locator("#period-picker option[selected]")).to_contain_text("2026-11-30")
    expect(page.locator("#statement-list th .hint").first).to_contain_text(stated)
    page.wait_for_selector("#chart-burndown .main-svg")
    names = page.evaluate("document.getElementById('chart-burndown').data.map(t => t.name)")
    assert not any("P10" in name for name in names)  # no forecast band on a closed period
