"""The tenant page and the burn-down API show what the pure functions compute from the metered
usage; periods are picked by number or date; the periods table exports as CSV."""

import csv
import io
import json
from decimal import Decimal

import pytest
from django.core.cache import cache

from loans.maths.figures import period_figures
from loans.models import Contract, Statement
from loans.services.ledger import bills
from tests.story import GPUS, NOW, START, expected_hours, held, story_hours, util


def page(client, user, query: str = ""):
    client.force_login(user)
    return client.get(f"/en/tenants/vision/{query}")


def expected(contract: Contract, index: int):
    period = contract.periods()[index]
    return period_figures(period=period, terms=contract.terms_for(index), usage=expected_hours(),
                          now=NOW, history_start=START)


def test_the_page_shows_the_figures_the_pure_functions_compute(client, lead, contract, metered):
    response = page(client, lead)
    assert response.status_code == 200
    want = expected(contract, 1)
    got = response.context["figures"]
    assert got.period == want.period
    assert got.used_gpu_hours == want.used_gpu_hours > 0
    assert got.busy_gpu_hours == want.busy_gpu_hours
    assert got.cost_so_far == want.cost_so_far
    assert got.projected_cost == want.projected_cost
    assert got.projected_exhaustion == want.projected_exhaustion
    assert got.burndown.remaining == want.burndown.remaining
    assert got.burndown.forecast == pytest.approx(want.burndown.forecast)
    html = response.content.decode()
    assert f'data-figure="used">{want.used_gpu_hours:,.1f}<' in html
    assert f'data-figure="cost">{want.cost_so_far.total:,.2f}<' in html
    assert f'data-figure="projected-cost">{want.projected_cost.total:,.2f}<' in html
    assert f'data-figure="days-left">{want.days_left:.1f}<' in html
    low, high = want.projected_band
    assert f'data-figure="projected-band">{low:,.0f} to {high:,.0f}<' in html
    assert "The fleet is too young to measure how often such a range holds" in html


def test_the_used_figure_is_the_sum_of_what_the_agents_sent(client, lead, contract, metered):
    period = contract.periods()[0]
    sent = sum(1 for k, hour in enumerate(story_hours()) for g in range(GPUS)
               if held(g, k) and period.contains(hour))
    figures = page(client, lead, "?period=1").context["figures"]
    assert figures.used_gpu_hours == Decimal(sent)
    busy = sum(util(g, k) / 100 for k, hour in enumerate(story_hours()) for g in range(GPUS)
               if held(g, k) and period.contains(hour))
    assert figures.busy_gpu_hours == pytest.approx(Decimal(str(busy)), abs=Decimal("1e-6"))
    # 1,000 committed at 10.00, overage at 12.00 (x1.2).
    overage = max(Decimal(0), Decimal(sent) - 1000)
    assert figures.cost_so_far.total == Decimal("10000.00") + overage * 12


def test_the_burn_down_chart_carries_remaining_ideal_forecast_and_its_band(
        client, lead, contract, metered):
    response = page(client, lead)
    chart = response.context["charts"]["burndown"]
    names = [trace["name"] for trace in chart["data"]]
    assert names == ["Ideal", "Forecast P10", "Forecast P10–P90", "Forecast", "Remaining"]
    want = expected(contract, 1).burndown
    by_name = {trace["name"]: trace for trace in chart["data"]}
    assert by_name["Remaining"]["y"] == [None if v is None else round(v, 3)
                                         for v in want.remaining]
    assert by_name["Ideal"]["y"][0] == 1000.0 and by_name["Ideal"]["y"][-1] == 0.0
    assert by_name["Forecast P10–P90"]["fill"] == "tonexty"
    ended = page(client, lead, "?period=1").context["charts"]["burndown"]
    assert [t["name"] for t in ended["data"]] == ["Ideal", "Remaining"]  # nothing to forecast
    assert len(by_name["Remaining"]["x"]) == len(want.points)
    # Times are the contract's wall clock: the period starts at local midnight.
    assert by_name["Remaining"]["x"][0] == "2026-12-01 00:00"


def test_the_hourly_chart_draws_the_quota_lines(client, lead, contract, metered):
    chart = page(client, lead).context["charts"]["hourly"]
    by_name = {trace["name"]: trace for trace in chart["data"]}
    assert set(by_name["Base quota"]["y"]) == {8}
    assert set(by_name["Max quota"]["y"]) == {16}
    want = expected(contract, 1)
    assert by_name["Allocated"]["y"] == [h.allocated_gpu_hours for h in want.hours]


def test_the_cumulative_chart_ends_at_used_and_busy(client, lead, contract, metered):
    chart = page(client, lead).context["charts"]["cumulative"]
    by_name = {trace["name"]: trace for trace in chart["data"]}
    want = expected(contract, 1)
    assert by_name["Allocated"]["y"][-1] == pytest.approx(float(want.used_gpu_hours), abs=1e-3)
    assert by_name["Busy"]["y"][-1] == pytest.approx(float(want.busy_gpu_hours), abs=1e-3)


@pytest.mark.parametrize("query", ["?period=1", "?period=2026-11-17"])
def test_a_past_period_is_picked_by_number_or_by_a_date_inside_it(
        client, lead, contract, metered, query):
    figures = page(client, lead, query).context["figures"]
    assert figures.period == contract.periods()[0]
    assert figures.state == "ended"
    assert figures.days_left == 0
    assert figures.projected_used_gpu_hours == figures.used_gpu_hours


@pytest.mark.parametrize(("query", "message"), [
    ("?period=3", "Period 3 has not started"),
    ("?period=0", "Period 0 has not started"),
    ("?period=2027-05-01", "2027-05-01 is in no period of this contract that has started"),
    ("?period=yesterday", "period must be a period number, a date (YYYY-MM-DD)"),
    ("?period=%ff", "period must be a period number"),
    ("?period=%00%ff", "Text may not contain the NUL character"),
])
def test_a_period_that_is_not_there_is_a_clear_400(client, lead, contract, metered, query,
                                                    message):
    response = page(client, lead, query)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_the_whole_contract_view_adds_up_its_periods(client, lead, contract, metered):
    response = page(client, lead, "?period=all")
    rows, totals = response.context["rows"], response.context["totals"]
    assert [r.state for r in rows] == ["ended", "open"]
    assert totals["used_gpu_hours"] == sum(r.used_gpu_hours for r in rows)
    # Nothing stated yet: the cost is what each period's statement would bill now.
    assert totals["cost"] == sum(bills.of_entry(r).total for r in rows)
    assert response.context["whole"].total == totals["cost"]
    # To date against the whole term; the ended periods' unused hours apart from the hours
    # the open period still has (they were one "Unused" figure).
    assert totals["term_committed_gpu_hours"] == 12 * contract.terms_for(0).committed_gpu_hours
    assert totals["unused_ended_gpu_hours"] == rows[0].cost.unused_gpu_hours
    assert totals["left_open_gpu_hours"] == rows[1].cost.unused_gpu_hours
    html = response.content.decode()
    assert "Committed to date" in html and "for the whole term" in html
    assert "Unused in ended periods" in html and "Still left in the open period" in html
    chart = response.context["charts"]["periods"]
    assert [t["name"] for t in chart["data"]] == ["Committed", "Allocated", "Busy"]
    assert chart["data"][1]["y"] == [float(r.used_gpu_hours) for r in rows]


def test_a_closed_period_shows_its_final_usage_and_what_its_statement_billed(
        client, lead, contract, metered):
    period = contract.periods()[0]
    Statement.objects.create(
        contract=contract, period_index=0, period_start=period.start, period_end=period.end,
        committed_gpu_hours=1000, allocated_gpu_hours=1234, busy_gpu_hours=600,
        overage_gpu_hours=234, unused_gpu_hours=0, committed_rate=10, overage_rate=12,
        committed_cost=Decimal("10000.00"), overage_cost=Decimal("2808.00"),
        total_cost=Decimal("12808.00"), currency="CNY", completeness=Decimal("0.9950"))
    context = page(client, lead, "?period=all").context
    rows, metered = context["rows"], expected(contract, 0).used_gpu_hours
    assert rows[0].state == "closed" and rows[0].completeness == Decimal("0.9950")
    assert rows[0].used_gpu_hours == metered and rows[0].statement.allocated_gpu_hours == 1234
    assert rows[0].corrected_gpu_hours == metered - 1234
    # The difference is pending, priced at period 1's overage rate, for the next statement.
    [(entry, correction)] = context["ledger"].pending
    assert entry.period.index == 0 and correction.gpu_hours == metered - 1234
    assert correction.amount == (metered - 1234) * 12


def test_the_periods_export_as_csv(client, lead, contract, metered):
    client.force_login(lead)
    response = client.get(f"/en/tenants/vision/periods.csv?contract={contract.pk}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["period"] for r in rows] == ["1", "2"]
    want = expected(contract, 0)
    assert rows[0]["start"] == "2026-11-01T00:00:00+08:00"
    assert Decimal(rows[0]["allocated_gpu_hours"]) == want.used_gpu_hours.quantize(
        Decimal("0.1"))
    assert Decimal(rows[0]["total_cost"]) == want.cost_so_far.total
    # In the page's words, and each column to one precision (it mixed 0, 0.000000, 1808.000000)
    assert rows[0]["state"] == "awaiting statement" and rows[1]["state"] == "open"
    for row in rows:
        assert all(len(row[c].split(".")[1]) == 1 for c in (
            "committed_gpu_hours", "allocated_gpu_hours", "busy_gpu_hours",
            "overage_gpu_hours", "unused_gpu_hours"))
        assert all(len(row[c].split(".")[1]) == 2 for c in ("committed_cost", "total_cost"))
        assert len(row["overage_rate"].split(".")[1]) == 4


def test_the_burn_down_api_serves_the_page_s_figures(client, lead, contract, metered):
    client.force_login(lead)
    body = client.get(f"/api/v1/contracts/{contract.pk}/burndown").json()
    want = expected(contract, 1)
    assert body["period"]["number"] == 2 and body["period"]["state"] == "open"
    assert Decimal(body["used_gpu_hours"]) == want.used_gpu_hours
    # Outside a group and before its statement, the bill is the terms' cost (the fee
    # apart, which the first period's statement bills).
    assert Decimal(body["cost_so_far"]["total"]) == want.cost_so_far.total
    assert Decimal(body["projected"]["total"]) == want.projected_cost.total
    assert body["cost_so_far"]["stated"] is False
    assert body["cost_so_far"]["borrowed_gpu_hours"] == "0.000000"
    assert Decimal(body["projected"]["used_gpu_hours"]) == want.projected_used_gpu_hours
    assert body["series"]["remaining"] == want.burndown.remaining
    assert len(body["hours"]) == len(want.hours)
    band = body["projected"]["band"]
    assert (band["p10_used_gpu_hours"], band["p90_used_gpu_hours"]) == pytest.approx(
        want.projected_band, abs=1e-3)
    assert band["p10_used_gpu_hours"] <= float(want.projected_used_gpu_hours) <= band[
        "p90_used_gpu_hours"]
    assert band["coverage"] is None and band["coverage_forecasts"] == 0  # not measured yet
    assert band["calibrated_on"] == ("fleet" if want.burndown.spread.own else "prior")
    assert len(body["projected"]["exhaustion_between"]) == 2
    assert body["admission"]["policy"] == "allow"
    assert body["admission"]["state"] == ("open" if want.used_gpu_hours < want.committed_gpu_hours
                                          else "overage")
    past = client.get(f"/api/v1/contracts/{contract.pk}/burndown?period=1").json()
    assert past["period"]["state"] == "ended" and past["projected"]["band"] is None
    assert Decimal(past["used_gpu_hours"]) == expected(contract, 0).used_gpu_hours


def test_the_burn_down_api_answers_a_bad_period_with_400(client, lead, contract, metered):
    client.force_login(lead)
    response = client.get(f"/api/v1/contracts/{contract.pk}/burndown?period=13")
    assert response.status_code == 400
    assert "Period 13 has not started" in response.json()["period"][0]


def test_the_heatmap_is_each_gpu_s_busy_share_by_local_day(client, lead, contract, metered):
    client.force_login(lead)
    figure = client.get(f"/api/v1/contracts/{contract.pk}/heatmap?period=1").json()
    heatmap = figure["data"][0]
    assert heatmap["y"] == ["gpu-node-01/0", "gpu-node-01/1", "gpu-node-01/2"]
    assert heatmap["x"][0] == "2026-11-01" and heatmap["x"][-1] == "2026-11-30"
    # GPU 1 on the first local day: the story's hours 0-23 in Asia/Shanghai.
    hours = [k for k in range(24) if held(1, k)]
    want = sum(util(1, k) for k in hours) / len(hours)
    assert heatmap["z"][1][0] == pytest.approx(want, abs=0.05)
    assert heatmap["customdata"][1][0] == len(hours)


def test_a_tenant_without_a_contract_gets_an_empty_state(client, lead):
    response = page(client, lead)
    assert response.status_code == 200
    assert "This tenant has no contract yet" in response.content.decode()


def test_a_contract_not_started_says_when_it_starts(client, lead, contract, frozen):
    Contract.objects.filter(pk=contract.pk).update(starts_on="2027-01-01", ends_on="2028-01-01")
    response = page(client, lead)
    assert "This contract starts on" in response.content.decode()


def test_the_page_speaks_chinese(client, lead, contract, metered):
    client.force_login(lead)
    response = client.get("/zh-hans/tenants/vision/")
    html = response.content.decode()
    assert "账期与结算单" in html and "导出 CSV" in html and "账期末预计费用" in html
    burndown = response.context["charts"]["burndown"]
    assert burndown["layout"]["title"]["text"] == "剩余承诺 GPU 小时"
    assert [t["name"] for t in burndown["data"]][-1] == "剩余"


def test_the_page_s_queries_do_not_grow_with_usage(client, lead, contract, metered,
                                                   django_assert_max_num_queries):
    """Rollups are read a period at a time, never a row per hour or per GPU."""
    client.force_login(lead)
    with django_assert_max_num_queries(18):  # the band's stored coverage, once a day
        assert client.get("/en/tenants/vision/").status_code == 200
    # The ledger's reading (statements, groups, every period's sums: the bill of a stated
    # period is its statement's; the floor's waits), the figures' hours, and the overage
    # policy in force.
    with django_assert_max_num_queries(11):
        assert client.get(f"/api/v1/contracts/{contract.pk}/burndown").status_code == 200


def test_settled_days_of_the_heatmap_are_cached_and_today_stays_live(client, lead, contract,
                                                                     metered):
    client.force_login(lead)
    url = f"/api/v1/contracts/{contract.pk}/heatmap"
    before = client.get(url).json()["data"][0]
    assert before["x"] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    # A new GPU reports an hour of yesterday (late, past the grace) and an hour of today.
    token = metered.issue_token()
    late = {"gpu_uuid": "GPU-late", "gpu_index": 9, "interval_s": 3600, "allocated": True,
            "util_pct": 10.0, "owner": {"namespace": "vision"}}
    body = {"node": metered.name, "samples": [
        {**late, "ts": "2026-12-02T02:00:00Z"}, {**late, "ts": "2026-12-03T02:00:00Z"}]}
    response = client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.json()["accepted"] == 2
    after = client.get(url).json()["data"][0]
    row = after["y"].index("gpu-node-01/9")
    assert after["z"][row] == [None, None, 10.0]  # yesterday comes from the cache
    cache.clear()  # the cached day expires
    fresh = client.get(url).json()["data"][0]
    assert fresh["z"][row] == [None, 10.0, 10.0]
    assert fresh["z"][:row] == before["z"]
