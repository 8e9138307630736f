import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from loans.models import BurstRequest, Contract
from loans.services.ledger import read as ledgers
from loans.services.ledger.closing import close_due_periods
from metering.models import Gpu, GpuHour
from tests.conftest import PASSWORD
from tests.loans.services.test_bursts import pool  # noqa: F401
from tests.story import NOW

pytestmark = pytest.mark.browser


def log_in(page, base: str, username: str, next_path: str = "/en/",
           password: str = PASSWORD) -> None:
    page.goto(f"{base}/en/accounts/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("main button[type=submit]")


def traces(page, chart: str) -> list[str]:
    page.wait_for_selector(f"#{chart} .main-svg")
    return page.evaluate(f"document.getElementById('{chart}').data.map(t => t.name)")


def test_a_lead_reads_the_burn_down_switches_period_and_language_and_exports_csv(
        live_server, page, lead, contract, metered):
    log_in(page, live_server.url, "lead")
    expect(page).to_have_url(f"{live_server.url}/en/tenants/vision/")
    assert traces(page, "chart-burndown") == [
        "Ideal", "Forecast P10", "Forecast P10–P90", "Forecast", "Remaining"]
    assert traces(page, "chart-hourly") == ["Allocated", "Busy", "Base quota", "Max quota"]
    assert traces(page, "chart-heatmap") == ["Utilisation"]
    expect(page.locator("[data-figure=days-left]")).to_have_text("28.5")

    page.select_option("#period-picker", "1")
    expect(page).to_have_url(re.compile(r"period=1"))
    expect(page.locator("#period-state")).to_contain_text("Final figures")
    assert traces(page, "chart-burndown")[-1] == "Remaining"

    # The menu switches as it is changed (its button is for pages without scripts), and
    # names each language in its own words.
    expect(page.locator(".language-switch button")).to_be_hidden()
    expect(page.locator("#language-switch option[value=zh-hans]")).to_have_text("简体中文")
    page.select_option("#language-switch", "zh-hans")
    expect(page).to_have_url(re.compile(r"/zh-hans/tenants/vision/\?.*period=1"))
    expect(page.locator("#statements h2")).to_have_text("账期与结算单")
    assert traces(page, "chart-burndown")[-1] == "剩余"

    with page.expect_download() as download:
        page.click("#periods-csv")
    text = Path(download.value.path()).read_text()
    assert text.splitlines()[0].startswith("period,start,end,state,committed_gpu_hours")
    assert len(text.splitlines()) == 3  # the header and two periods


def test_a_closed_period_shows_final_figures_labelled_as_such_in_both_languages(
        live_server, page, lead, contract, metered):
    """Period 1 of the story used about 1,380 of its 1,000 committed GPU-hours and is stated:
    it showed "Overage so far" as a negative number, a projected cost, "Days left 0.0" and a
    utilisation of 100%, as if it were still running."""
    close_due_periods(NOW)
    entry = ledgers.read(contract, NOW).entries[0]
    assert entry.state == "closed"
    used, committed = entry.metered, entry.terms.committed_gpu_hours
    log_in(page, live_server.url, "lead", "/en/tenants/vision/?period=1")
    state = page.locator("#period-state")
    expect(state).to_have_attribute("data-state", "closed")
    # One convention with the period picker ("2026-11-01 – 2026-11-30"): the last day, not
    # the next day's midnight; and each statement says it is labelled with when it was stated.
    expect(state).to_contain_text("Final figures: this period ended with 2026-11-30")
    expect(page.locator("#period-picker option[selected]")).to_contain_text("2026-11-30")
    expect(page.locator("#statement-list th .hint").first).to_contain_text("stated 2026-12-")
    expect(page.locator("[data-figure=overage]")).to_have_text(f"{used - committed:,.1f}")
    expect(page.locator("[data-figure=used-share]")).to_have_text(f"{used / committed:.1%}")
    expect(page.locator("[data-figure=cost]")).to_have_text(
        f"{entry.statement.total_cost:,.2f}")
    for forecast in ("remaining", "projected-cost", "days-left", "exhaustion", "utilisation"):
        expect(page.locator(f"[data-figure={forecast}]")).to_have_count(0)
    page.goto(f"{live_server.url}/zh-hans/tenants/vision/?period=1")
    expect(page.locator("#period-state")).to_contain_text("最终数据")
    expect(page.locator("#key-figures")).not_to_contain_text("Overage")


def test_a_period_whose_agents_came_late_is_stated_incomplete_from_when_data_exists(
        live_server, page, lead, contract, metered):
    """Each demo tenant's period 1 had no data for 19 days and read 100% complete."""
    came = contract.periods()[0].start + timedelta(days=19)
    GpuHour.objects.filter(hour__lt=came).delete()
    Gpu.objects.update(first_seen_at=came)
    close_due_periods(NOW)
    log_in(page, live_server.url, "lead", "/en/tenants/vision/")
    row = page.locator("#statements tr[data-period='1']")
    expect(row).to_contain_text(f"{11 / 30:.1%}")
    expect(row.locator(".data-from")).to_have_text("data from 2026-11-20 00:00")
    page.goto(f"{live_server.url}/zh-hans/tenants/vision/")
    expect(page.locator("#statements tr[data-period='1'] .data-from")).to_have_text(
        "自 2026-11-20 00:00 起有数据")


def test_an_operator_lands_on_the_fleet_and_sorts_it(live_server, page, operator, contract,
                                                     other_tenant, plan, metered):
    Contract.objects.create(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                            status=Contract.Status.ACTIVE)
    log_in(page, live_server.url, "operator")
    expect(page).to_have_url(f"{live_server.url}/en/fleet/")
    rows = page.locator("#fleet-table tbody tr")
    expect(rows).to_have_count(2)

    page.click("#fleet-table th a[data-sort=used]")
    expect(page.locator("#fleet-table th[aria-sort=descending]")).to_contain_text("Used")
    expect(rows.first).to_have_attribute("data-tenant", "vision")
    page.click("#fleet-table th a[data-sort=used]")
    expect(page.locator("#fleet-table th[aria-sort=ascending]")).to_contain_text("Used")
    expect(rows.first).to_have_attribute("data-tenant", "speech")


def test_the_fleet_sorts_by_the_money_at_stake_whichever_side_it_is_on(
        live_server, page, operator, contract, other_tenant, plan, metered):
    """vision heads for about 6,000 CNY of overage; speech, with no usage, for 10,000 CNY of
    waste: the larger sum comes first, though it is waste."""
    Contract.objects.create(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                            status=Contract.Status.ACTIVE)
    log_in(page, live_server.url, "operator")
    page.click("#fleet-table th a[data-sort=money]")
    expect(page.locator("#fleet-table th[aria-sort=descending]")).to_contain_text(
        "Projected overage or waste")
    rows = page.locator("#fleet-table tbody tr")
    expect(rows.first).to_have_attribute("data-tenant", "speech")
    expect(rows.nth(1)).to_have_attribute("data-tenant", "vision")


def ask_backwards(form) -> None:
    """The burst form sent for 2 GPUs ending before they start: refused."""
    form.locator("input[name=gpus]").fill("2")
    form.locator("input[name=starts_at]").fill("2030-01-02T20:00")
    form.locator("input[name=ends_at]").fill("2030-01-01T08:00")
    form.locator("input[name=reason]").fill("ablation sweep")
    form.locator("button[type=submit]").click()


def test_the_burst_form_answers_in_its_card_keeps_what_was_typed_and_asks_once(
        live_server, page, lead, contract, pool):  # noqa: F811 - the fixture imported above
    """Its messages showed in the Recommendations card, a refused form came back empty, and
    the same form sent twice (a double click) was granted twice."""
    log_in(page, live_server.url, "lead", "/en/tenants/vision/")
    form = page.locator(".burst-form")
    ask_backwards(form)
    expect(page.locator("#bursts .error")).to_contain_text("The end must be after the start.")
    expect(page.locator("#recommendations .error")).to_have_count(0)
    expect(form.locator("input[name=reason]")).to_have_value("ablation sweep")
    expect(form.locator("input[name=gpus]")).to_have_value("2")

    tomorrow = (timezone.now().astimezone(contract.zone) + timedelta(days=1)).date()
    form.locator("input[name=starts_at]").fill(f"{tomorrow}T20:00")
    form.locator("input[name=ends_at]").fill(f"{tomorrow}T23:00")
    # The same form posted twice (a double click the page did not stop). One after the
    # other: the live server shares SQLite's in-memory connection between its threads.
    statuses = page.evaluate("""async () => {
      const form = document.querySelector('.burst-form');
      const send = () => fetch(form.action, {method: 'POST', body: new FormData(form)});
      const first = await send();
      const second = await send();
      return [first.status, second.status];
    }""")
    assert statuses == [200, 200]
    assert list(BurstRequest.objects.values_list("gpus", "state")) == [(2, "granted")]
    page.reload()
    expect(page.locator("#bursts tbody tr")).to_have_count(1)


def test_a_period_an_hour_old_with_no_usage_reads_as_the_start_of_its_month(
        live_server, page, lead, contract):
    """The cumulative chart ran from -1 to 1 with one day repeated along its axis."""
    with time_machine.travel(datetime(2026, 11, 30, 17, 0, tzinfo=UTC), tick=False):
        log_in(page, live_server.url, "lead", "/en/tenants/vision/")
        for chart in ("chart-cumulative", "chart-hourly"):
            page.wait_for_selector(f"#{chart} .main-svg")
            x, y = page.evaluate(f"""() => {{
              const layout = document.getElementById('{chart}')._fullLayout;
              return [layout.xaxis.range, layout.yaxis.range];
            }}""")
            assert y[0] == 0, (chart, y)
            assert x[0].startswith("2026-12-01") and x[1].startswith("2027-01-01"), (chart, x)
        expect(page.locator("#chart-heatmap .empty")).to_have_text(
            "No GPU was held in this period yet.")


def test_buy_or_loan_answers_one_question_its_chart_draws(live_server, page, lead, contract):
    """It read "Cheaper: buying, break-even 0.0%" beside a chart on which buying cost more
    than the loan over every month shown."""
    log_in(page, live_server.url, "lead", "/en/tenants/vision/buy-vs-loan/")
    page.goto(f"{live_server.url}/en/tenants/vision/buy-vs-loan/?gpus=8&price_per_gpu=230000"
              "&overhead_per_gpu_year=5000&maintenance_percent=2&depreciation_years=6"
              "&utilisation_percent=60&months=12&target=contract")
    expect(page.locator("#buy-question")).to_contain_text("Over the next 12 months")
    page.wait_for_selector("#chart-buy .main-svg")
    ends = page.evaluate("document.getElementById('chart-buy').data.map(t => t.y[t.y.length - 1])")
    buy, lent = (float(page.locator(f"[data-figure={name}]").inner_text().split()[0]
                       .replace(",", "")) for name in ("buy-total", "loan-total"))
    assert ends == [pytest.approx(buy), pytest.approx(lent)]
    verdict = "buying" if buy < lent else "the loan"
    expect(page.locator("[data-figure=cheaper]")).to_have_text(verdict)


def test_a_chart_box_says_it_is_loading_until_its_chart_is_drawn(live_server, page, lead,
                                                                contract, metered):
    """On a slow network the chart boxes stood empty and white for seconds: each says it is
    loading until Plotly has drawn it (here Plotly is held back, as a slow link would)."""
    log_in(page, live_server.url, "lead")
    page.route("**/plotly-cartesian.min.js", lambda route: route.abort())
    page.goto(f"{live_server.url}/en/tenants/vision/")
    for chart in ("chart-burndown", "chart-cumulative", "chart-hourly"):
        expect(page.locator(f"#{chart} .loading")).to_have_text("Loading the chart…")
    page.unroute("**/plotly-cartesian.min.js")
    page.goto(f"{live_server.url}/zh-hans/tenants/vision/")
    page.wait_for_selector("#chart-burndown .main-svg")
    expect(page.locator("#chart-burndown .loading")).to_have_count(0)
