"""The demo, frozen (no agents, the clock fixed), walked in chromium as every lead and the
operator: every period, the whole contract and the fleet page. Each money and GPU-hour figure
shown (cards, verdict, periods table, statements, fleet rows) is compared with the statements
API, the burn-down API and the CSVs, after rounding to the precision shown: one figure, one
value (DESIGN "Every surface reads the ledger"). Before loans.services.ledger.bills, vision's stated
period 1 card said 97,596.00 where its statement billed 92,145.00."""

import csv
import io
import re
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

import pytest
import time_machine
from django.core.management import call_command

from loans.demo import DEMO_PASSWORD, OPERATOR
from loans.models import Contract
from tests.browser.test_dashboard_in_a_browser import log_in

pytestmark = pytest.mark.browser
D = Decimal
AT = datetime(2026, 12, 3, 4, tzinfo=UTC)
TENANTS = ("vision", "nlp", "speech", "recsys")


def shown(text: str) -> Decimal:
    """A figure as the page writes it ("92,145.00", "1,241.0") as a number."""
    return D(re.sub(r"[^\d.\-]", "", text))


def at_precision(value: str | Decimal, places: int) -> Decimal:
    return D(value).quantize(D(1).scaleb(-places), rounding=ROUND_HALF_UP)


def figures(page) -> dict[str, str]:
    return {k: v for k, v in page.eval_on_selector_all(
        "[data-figure]", "els => els.map(e => [e.dataset.figure, e.textContent.trim()])")}


def api(page, path: str):
    """A GET with the page's session, from the live server the page is on."""
    base = re.match(r"https?://[^/]+", page.url).group(0)
    answer = page.request.get(base + path)
    assert answer.ok, (path, answer.status)
    return answer


@pytest.fixture
def demo(db):
    with time_machine.travel(AT, tick=False):
        out = io.StringIO()
        call_command("seed_demo", "--days", "40", stdout=out)
        for command in ("close_periods", "recommend", "check_alerts"):
            call_command(command, stdout=out)
        yield


def walk_contract(page, base: str, slug: str, contract: Contract) -> int:
    """Every view of one contract; returns how many figures were compared."""
    compared = 0
    statements = api(page, f"/api/v1/contracts/{contract.pk}/statements").json()
    periods = list(csv.DictReader(io.StringIO(api(
        page, f"/en/tenants/{slug}/periods.csv?contract={contract.pk}").text())))
    numbers = [int(r["period"]) for r in periods]
    bills = {}
    for number in numbers:
        body = api(page, f"/api/v1/contracts/{contract.pk}/burndown?period={number}").json()
        bills[number] = body
        page.goto(f"{base}/en/tenants/{slug}/?contract={contract.pk}&period={number}")
        cards = figures(page)
        bill = body["cost_so_far"]
        assert shown(cards["cost"]) == at_precision(bill["total"], 2), (slug, number)
        assert shown(cards["used"]) == at_precision(bill["used_gpu_hours"], 1)
        compared += 2
        for name, field in (("borrowed", "borrowed_gpu_hours"), ("lent", "lent_gpu_hours"),
                            ("overage", "overage_gpu_hours")):
            if name in cards:
                assert shown(cards[name]) == at_precision(bill[field], 1), (slug, number, name)
                compared += 1
        if body["period"]["state"] == "open":
            projected = body["projected"]
            assert shown(cards["projected-cost"]) == at_precision(projected["total"], 2)
            verdict = page.locator("#verdict").inner_text()
            about = re.search(r"expect about ([\d,]+) CNY", verdict).group(1)
            assert shown(about) == at_precision(projected["total"], 0), verdict
            compared += 2
        # The periods table and the CSV: this period's row.
        row = page.locator(f"#periods tr[data-period='{number}']")
        assert D(row.locator("td[data-total]").get_attribute("data-total")) == D(bill["total"])
        [line] = [r for r in periods if int(r["period"]) == number]
        assert D(line["total_cost"]) == at_precision(bill["total"], 2)
        assert D(line["borrowed_gpu_hours"]) == at_precision(bill["borrowed_gpu_hours"], 1)
        compared += 3
        stated = [s for s in statements["statements"]
                  if s["kind"] == "period" and s["number"] == number]
        if stated:
            # A stated period's card is its statement, less the corrections of other periods
            # it carries.
            want = D(stated[0]["total"]) - sum(
                (D(x["amount"]) for x in stated[0]["lines"] if "corrects_period" in x), D(0))
            assert at_precision(bill["total"], 2) == want, (slug, number)
            assert bill["stated"] is True
            compared += 1
    page.goto(f"{base}/en/tenants/{slug}/?contract={contract.pk}&period=all")
    whole = shown(figures(page)["cost"])
    billed = sum((D(s["total"]) for s in statements["statements"]), D(0))
    pending = sum((D(c["amount"]) for c in statements["pending_corrections"]), D(0))
    unstated = sum((D(b["cost_so_far"]["total"]) for b in bills.values()
                    if not b["cost_so_far"]["stated"]), D(0))
    assert whole == at_precision(billed + pending + unstated, 2), slug
    return compared + 1


def test_every_figure_a_lead_and_the_operator_read_is_the_bill(live_server, page, demo):
    compared = 0
    with time_machine.travel(AT, tick=False):
        for slug in TENANTS:
            page.context.clear_cookies()
            log_in(page, live_server.url, f"{slug}-lead", f"/en/tenants/{slug}/",
                   password=DEMO_PASSWORD)
            page.wait_for_selector("#key-figures")
            for contract in Contract.objects.filter(tenant__slug=slug).exclude(
                    status__in=["draft", "cancelled"]):
                compared += walk_contract(page, live_server.url, slug, contract)
        page.context.clear_cookies()
        log_in(page, live_server.url, OPERATOR[0], "/en/fleet/", password=OPERATOR[1])
        page.wait_for_selector("#fleet-table")
        # The page's rows say what the CSV says: projected overage (after sharing) or waste.
        shown_rows = page.eval_on_selector_all(
            "#fleet-table tbody tr", "rows => rows.map(r => r.innerText)")
        assert len(shown_rows) == len(TENANTS)
        rows = {r["tenant"]: r for r in csv.DictReader(io.StringIO(
            api(page, "/en/fleet.csv").text()))}
        for slug, row in rows.items():
            contract = Contract.objects.get(pk=row["contract"])
            body = api(page, f"/api/v1/contracts/{contract.pk}/burndown").json()
            assert D(row["projected_overage_cost"]) == at_precision(
                body["projected"]["overage_cost"], 2), slug
            assert D(row["used_gpu_hours"]) == at_precision(body["used_gpu_hours"], 1), slug
            compared += 2
    assert compared > 60
