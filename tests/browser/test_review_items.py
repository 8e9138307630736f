"""What a new user tripped on (issue 36), walked in chromium on a desktop and a phone, in
English and Chinese where words are involved: the items whose fixes were first tested
through Django's client get a browser walk here."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_dashboard_in_a_browser import log_in
from tests.browser.test_phone import PHONE

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
