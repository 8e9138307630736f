"""The Content-Security-Policy, as chromium enforces it: the pages, their Plotly charts, the
admin, the API docs and the browsable API work under it, and nothing is refused."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_dashboard_in_a_browser import log_in, traces

pytestmark = pytest.mark.browser

WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__violations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


def watched(page) -> list[str]:
    """Every CSP refusal the page reported, in its console or as an event."""
    refused = []
    page.on("console", lambda message: refused.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.add_init_script(WATCH)
    return refused


def violations(page, console: list[str]) -> list[str]:
    return console + page.evaluate("window.__violations")


def test_no_page_breaks_the_content_security_policy(live_server, page, operator, contract,
                                                    metered):
    console = watched(page)
    log_in(page, live_server.url, "operator", "/en/tenants/vision/")
    expect(page).to_have_url(f"{live_server.url}/en/tenants/vision/")
    assert traces(page, "chart-burndown")[-1] == "Remaining"
    page.wait_for_selector("#chart-heatmap .main-svg")  # fetched after the page
    assert violations(page, console) == []

    # The period picker submits itself (site.js, no inline handler).
    page.select_option("#period-picker", "1")
    expect(page).to_have_url(f"{live_server.url}/en/tenants/vision/?contract={contract.pk}"
                             "&period=1")
    assert violations(page, console) == []

    for path, ready in [
        ("/en/fleet/", "#fleet-table"),
        ("/en/tenants/vision/buy-vs-loan/", "main"),
        ("/en/admin/", "#content"),
        ("/en/admin/loans/contract/", "#result_list"),
        (f"/en/admin/loans/contract/{contract.pk}/change/", "#contract_form"),
        ("/en/admin/metering/usagesample/", "#content"),
        ("/api/docs/", ".swagger-ui .info"),
        ("/api/v1/bursts/", ".response-info"),
    ]:
        page.goto(live_server.url + path)
        page.wait_for_selector(ready)
        assert violations(page, console) == [], path
