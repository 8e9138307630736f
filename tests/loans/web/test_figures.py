"""Period figures and the charts built from them: worked examples and invariants."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths.billing import Period, Terms
from loans.maths.figures import HourUsage, period_figures
from loans.web import charts
from metering.usage import GpuDay
from tests.tiers import examples

H = timedelta(hours=1)
START = datetime(2026, 11, 1, tzinfo=UTC)
PERIOD = Period(0, START, START + timedelta(days=30))
TERMS = Terms(committed_gpu_hours=Decimal(1000), committed_rate=Decimal("10.00"),
              overage_rate=Decimal("12.00"), base_quota_gpus=2, max_quota_gpus=4,
              term_months=12, currency="CNY")
UTC_ZONE = ZoneInfo("UTC")


def steady(gpus: float, busy: float, start: datetime, end: datetime) -> list[HourUsage]:
    out, hour = [], start
    while hour < end:
        out.append(HourUsage(hour, gpus, busy, gpus))
        hour += H
    return out


def test_half_way_at_two_gpus_a_lead_sees_overage_coming():
    now = START + timedelta(days=15)
    figures = period_figures(period=PERIOD, terms=TERMS,
                             usage=steady(2, 1.5, START, now), now=now)
    assert figures.used_gpu_hours == Decimal(720)
    assert figures.busy_gpu_hours == Decimal(540)
    assert figures.remaining_gpu_hours == Decimal(280)
    assert figures.utilisation == Decimal("0.72")
    assert figures.busy_share == Decimal("0.75")
    assert figures.cost_so_far.total == Decimal("10000.00")  # the commitment is paid anyway
    assert figures.projected_used_gpu_hours == Decimal(1440)
    assert figures.projected_cost.total == Decimal("10000.00") + 440 * Decimal("12.00")
    assert figures.projected_overage_gpu_hours == Decimal(440)
    assert figures.projected_unused_gpu_hours == 0
    assert figures.days_left == 15
    assert figures.state == "open"
    # 280 GPU-h left at 2 GPU-h an hour: gone in 140 hours.
    assert figures.projected_exhaustion == now + 140 * H


def test_a_light_user_sees_the_commitment_it_will_not_use():
    now = START + timedelta(days=10)
    figures = period_figures(period=PERIOD, terms=TERMS, usage=steady(1, 0.2, START, now),
                             now=now)
    assert figures.projected_used_gpu_hours == Decimal(720)
    assert figures.projected_unused_gpu_hours == Decimal(280)
    assert figures.projected_exhaustion is None
    assert figures.projected_cost.total == Decimal("10000.00")


def test_an_ended_period_projects_what_it_used():
    now = PERIOD.end + timedelta(days=3)
    usage = steady(1, 0.5, START, PERIOD.end + timedelta(days=3))
    figures = period_figures(period=PERIOD, terms=TERMS, usage=usage, now=now)
    assert figures.state == "ended" and figures.days_left == 0
    assert figures.used_gpu_hours == Decimal(720)  # hours after the end belong to the next
    assert figures.projected_used_gpu_hours == figures.used_gpu_hours
    assert len(figures.hours) == 720


def test_cumulative_series_end_at_used_and_busy():
    now = START + timedelta(days=2)
    figures = period_figures(period=PERIOD, terms=TERMS, usage=steady(3, 1, START, now),
                             now=now)
    allocated, busy = figures.cumulative()
    assert allocated[-1] == 144 and busy[-1] == 48
    assert allocated == sorted(allocated)


@settings(max_examples=examples(60), deadline=None)
@given(values=st.lists(st.floats(0, 64, allow_nan=False), min_size=1, max_size=200),
       elapsed=st.integers(1, 720))
def test_figures_agree_with_each_other(values, elapsed):
    now = START + elapsed * H
    usage = [HourUsage(START + k * H, v, v / 2, v) for k, v in enumerate(values)]
    figures = period_figures(period=PERIOD, terms=TERMS, usage=usage, now=now)
    used = sum(v for k, v in enumerate(values) if k < elapsed)
    assert float(figures.used_gpu_hours) == pytest.approx(used, abs=1e-6)
    assert figures.remaining_gpu_hours == TERMS.committed_gpu_hours - figures.used_gpu_hours
    assert figures.projected_used_gpu_hours >= figures.used_gpu_hours
    assert figures.projected_cost.total >= figures.cost_so_far.total
    assert figures.cost_so_far.committed_cost == Decimal("10000.00")


def test_the_overage_region_is_shaded_only_when_the_curve_goes_below_zero():
    now = START + timedelta(days=15)
    heavy = period_figures(period=PERIOD, terms=TERMS, usage=steady(2, 1, START, now), now=now)
    light = period_figures(period=PERIOD, terms=TERMS, usage=steady(1, 1, START, now), now=now)
    assert charts.burndown_figure(heavy, UTC_ZONE)["layout"]["shapes"][0]["y1"] == 0
    assert charts.burndown_figure(light, UTC_ZONE)["layout"]["shapes"] == []


def test_the_heatmap_names_days_a_gpu_was_not_held_and_labels_every_row():
    """White areas had no legend entry, and a closed period's chart labelled every other GPU
    row (Plotly thins category ticks that crowd: 14 px a row)."""
    days = [GpuDay(7, date(2026, 11, 1), 10.0, 5.0), GpuDay(3, date(2026, 11, 2), 4.0, 4.0),
            GpuDay(9, date(2026, 11, 2), 0.0, 0.0)]  # seen, not held
    figure = charts.heatmap_figure(days, {3: "n1/0", 7: "n1/1", 9: "n1/2"})
    heatmap, not_held = figure["data"]
    assert heatmap["y"] == ["n1/0", "n1/1", "n1/2"]
    assert heatmap["x"] == ["2026-11-01", "2026-11-02"]
    assert heatmap["z"] == [[None, 100.0], [50.0, None], [None, None]]
    assert heatmap["customdata"] == [[None, 4.0], [10.0, None], [None, 0.0]]
    assert (not_held["name"], not_held["showlegend"], not_held["y"]) == (
        "Not held", True, heatmap["y"])
    assert not_held["z"] == [[1, None], [None, 1], [1, 1]]
    axis = figure["layout"]["yaxis"]
    assert axis["tickvals"] == axis["ticktext"] == heatmap["y"]
    assert figure["layout"]["height"] >= 18 * 3


def test_a_heatmap_of_gpus_held_every_day_has_no_entry_for_what_it_does_not_show():
    days = [GpuDay(3, date(2026, 11, 1), 10.0, 5.0)]
    assert [t["name"] for t in charts.heatmap_figure(days, {3: "n1/0"})["data"]] == [
        "Utilisation"]


def test_text_an_agent_sent_reaches_plotly_as_text_not_html():
    model = '<a href="https://x.example/">H100</a>'
    title = charts.pool_figure(model, {"hours": [], "guaranteed": [], "granted": [],
                                       "free": [], "physical": 0})["layout"]["title"]["text"]
    assert "<a" not in title and "&lt;a href=\"https://x.example/\"&gt;H100&lt;/a&gt;" in title
    days = [GpuDay(3, date(2026, 11, 1), 1.0, 1.0)]
    heatmap = charts.heatmap_figure(days, {3: "<b>n1</b>/0"})["data"][0]
    assert heatmap["y"] == ["&lt;b&gt;n1&lt;/b&gt;/0"]
