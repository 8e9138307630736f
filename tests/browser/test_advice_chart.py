"""The commitment advice's chart (issue 36, item 9): the whole P10-P90 band and every mark
inside the axes, on a desktop and a phone, in English and Chinese; a sharing group's pooled
advice, which has no cost curve, shows the group's costs instead of an empty chart."""

from decimal import Decimal

import pytest
import time_machine
from playwright.sync_api import expect

from loans.maths import recommend
from loans.models import Recommendation
from tests.browser.test_dashboard_in_a_browser import log_in
from tests.browser.test_phone import PHONE
from tests.story import NOW

pytestmark = pytest.mark.browser

RANGES = """(id) => { const gd = document.getElementById(id);
  return {x: gd._fullLayout.xaxis.range, y: gd._fullLayout.yaxis.range,
          points: gd.data.flatMap(t => t.y)}; }"""


def curve_evidence() -> dict:
    """The evidence the daily job writes, from a steady team with a weekly rhythm."""
    hourly = [4.0 + (2.0 if (h // 24) % 7 < 5 else -1.0) + (h % 24) / 24 for h in range(90 * 24)]
    advice = recommend.advise_commitment(hourly, period_hours=720, current=Decimal(4500),
                                         committed_rate=Decimal(10), overage_rate=Decimal(20),
                                         currency="CNY", term_months=6)
    return {"curve": [[p.commitment, p.expected, p.p10, p.p90] for p in advice.curve],
            "recommended": float(advice.recommended), "current": 4500.0,
            "rule_of_thumb": float(advice.rule_of_thumb)}


@pytest.fixture
def advised(contract):
    evidence = curve_evidence()
    curved = Recommendation.objects.create(
        contract=contract, kind="commitment", current="4500",
        recommended=f"{evidence['recommended']:.0f}", message="m", created_at=NOW,
        confidence="medium", currency="CNY", evidence=evidence)
    quota = Recommendation.objects.create(  # a card without a chart beside it
        contract=contract, kind="base_quota", current="8", recommended="9", message="q",
        created_at=NOW)
    return curved, quota


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_the_advice_charts_band_and_marks_lie_inside_its_axes(
        live_server, browser, lead, advised, language, viewport):
    curved, _quota = advised
    context = browser.new_context(locale="en-US", **({"viewport": viewport} if viewport else {}))
    page = context.new_page()
    page.set_default_timeout(15_000)
    with time_machine.travel(NOW, tick=False):
        log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/")
        chart = f"chart-recommendation-{curved.pk}"
        page.wait_for_selector(f"#{chart} .main-svg")
        drawn = page.evaluate(RANGES, chart)
    low, high = drawn["y"]
    values = [v for v in drawn["points"] if v is not None]
    # Before, autorange put the optimum on the bottom edge and the curve ran out of the top.
    assert low < min(values) and high > max(values)
    margin = (high - low) * 0.05
    assert min(values) - low >= margin and high - max(values) >= margin
    assert drawn["x"][0] <= 0 and drawn["x"][1] >= max(p[0] for p in curved.evidence["curve"])
    hint = {"en": "it narrows to the line where the commitment covers all the usage",
            "zh-hans": "收窄为一条线"}[language]
    expect(page.locator(f"#recommendation-{curved.pk} .hint").last).to_contain_text(hint)
    context.close()


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_a_pooled_advice_shows_the_groups_costs_not_an_empty_chart(
        live_server, page, lead, contract, language):
    pooled = Recommendation.objects.create(
        contract=contract, kind="commitment", current="4000", recommended="0", message="m",
        created_at=NOW, confidence="medium", currency="CNY",
        evidence={"pooled": {"group": "Acme AI", "teams": 2, "group_costs": {
            "current": "234000.00", "standalone": "255366.00", "recommended": "162000.00"}},
            "current": 4000.0, "recommended": 0.0})
    with time_machine.travel(NOW, tick=False):
        log_in(page, live_server.url, "lead", f"/{language}/tenants/vision/")
        article = page.locator(f"#recommendation-{pooled.pk}")
        expect(article).to_be_visible()
        # Before, the pooled advice drew an empty chart: axes from -1 to 6, no data.
        assert article.locator(".chart").count() == 0
        caption = {"en": "Expected cost of Acme AI a period, CNY",
                   "zh-hans": "Acme AI 每账期的预计费用（CNY）"}[language]
        expect(article.locator("table.pooled-costs caption")).to_have_text(caption)
        expect(article.locator("table.pooled-costs td")).to_have_text(
            ["234,000.00", "255,366.00", "162,000.00"])
