from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loans.maths import billing

D = Decimal
SHANGHAI = ZoneInfo("Asia/Shanghai")


def cost(committed, used, rate="10.00", overage=None, multiplier="1.2"):
    r_o = billing.overage_rate(D(rate), D(overage) if overage else None, D(multiplier))
    return billing.period_cost(committed=D(committed), used=D(used), committed_rate=D(rate),
                               overage_rate=r_o, currency="CNY")


def test_the_worked_example_of_the_issue_costs_eleven_thousand_two_hundred():
    result = cost("1000", "1100")
    assert result.committed_cost == D("10000.00")
    assert result.overage_gpu_hours == D("100.000000")
    assert result.overage_cost == D("1200.00")
    assert result.total == D("11200.00")
    assert result.unused_gpu_hours == 0


def test_usage_under_the_commitment_costs_the_commitment_and_leaves_hours_unused():
    result = cost("1000", "640.5")
    assert result.total == D("10000.00")
    assert result.overage_cost == 0
    assert result.unused_gpu_hours == D("359.500000")


def test_an_explicit_overage_rate_wins_over_the_multiplier():
    assert cost("100", "150", rate="11.00", overage="15.00").total == D("1850.00")


def test_money_is_rounded_half_up_per_line_and_lines_add_up():
    # 0.0000005 GPU-h rounds away; 1/3 of a cent in overage rounds to the nearest cent.
    result = billing.period_cost(committed=D("10"), used=D("10.3333335"),
                                 committed_rate=D("0.3333"), overage_rate=D("0.01"),
                                 currency="CNY")
    assert result.used_gpu_hours == D("10.333334")
    assert result.committed_cost == D("3.33")
    assert result.overage_cost == D("0.00")
    assert result.total == result.committed_cost + result.overage_cost


def test_float_gpu_hours_from_the_meter_are_taken_at_their_shortest_repr():
    assert billing.gpu_hours(0.1 + 0.2) == D("0.300000")
    assert billing.gpu_hours(1 / 7) == D("0.142857")


def test_negative_inputs_are_refused():
    with pytest.raises(ValueError):
        cost("100", "-1")


def test_utilisation_and_unused_follow_the_design_formulas():
    assert billing.utilisation(D(1000), D(800)) == D("0.8")
    assert billing.utilisation(D(1000), D(1200)) == 1
    assert billing.utilisation(D(0), D(5)) is None
    assert billing.unused(D(1000), D(800)) == D(200)


money_amounts = st.decimals(min_value=0, max_value=10**6, places=2, allow_nan=False)
hours = st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False)
multipliers = st.decimals(min_value=1, max_value=5, places=3, allow_nan=False)


@given(committed=hours, used=hours, more=hours, rate=money_amounts, multiplier=multipliers)
def test_cost_never_falls_as_usage_grows(committed, used, more, rate, multiplier):
    r_o = billing.overage_rate(rate, None, multiplier)
    low = billing.period_cost(committed=committed, used=used, committed_rate=rate, overage_rate=r_o,
                              currency="CNY")
    high = billing.period_cost(committed=committed, used=used + more, committed_rate=rate,
                               overage_rate=r_o, currency="CNY")
    assert high.total >= low.total


@given(committed=hours, used=hours, rate=money_amounts, multiplier=multipliers)
def test_cost_is_at_least_the_commitment_and_exactly_it_up_to_the_commitment(
    committed, used, rate, multiplier
):
    r_o = billing.overage_rate(rate, None, multiplier)
    result = billing.period_cost(committed=committed, used=used, committed_rate=rate,
                                 overage_rate=r_o, currency="CNY")
    assert result.total >= result.committed_cost == billing.money(committed * rate, "CNY")
    if used <= committed:
        assert result.total == result.committed_cost
    assert result.total == result.committed_cost + result.overage_cost
    assert result.overage_gpu_hours - result.unused_gpu_hours == used - committed


@given(committed=hours.filter(lambda h: h > 0), used=hours)
def test_utilisation_and_unused_share_the_commitment(committed, used):
    share = billing.utilisation(committed, used)
    assert 0 <= share <= 1
    assert share * committed + billing.unused(committed, used) == committed


def test_periods_are_anniversary_months_from_local_midnight():
    got = billing.periods(date(2026, 1, 15), 3, SHANGHAI)
    assert [(p.start, p.end) for p in got] == [
        (datetime(2026, 1, 14, 16, tzinfo=UTC), datetime(2026, 2, 14, 16, tzinfo=UTC)),
        (datetime(2026, 2, 14, 16, tzinfo=UTC), datetime(2026, 3, 14, 16, tzinfo=UTC)),
        (datetime(2026, 3, 14, 16, tzinfo=UTC), datetime(2026, 4, 14, 16, tzinfo=UTC)),
    ]
    assert [p.index for p in got] == [0, 1, 2]


def test_a_contract_starting_on_the_31st_comes_back_to_the_31st_after_short_months():
    starts = [p.start.astimezone(SHANGHAI).date() for p in billing.periods(date(2026, 1, 31), 4,
                                                                           SHANGHAI)]
    assert starts == [date(2026, 1, 31), date(2026, 2, 28), date(2026, 3, 31), date(2026, 4, 30)]
    leap = billing.periods(date(2028, 1, 31), 2, SHANGHAI)[1].start.astimezone(SHANGHAI).date()
    assert leap == date(2028, 2, 29)


def test_periods_across_a_dst_change_are_an_hour_shorter_or_longer():
    berlin = ZoneInfo("Europe/Berlin")
    march, october = billing.periods(date(2026, 3, 1), 8, berlin)[0::7]
    assert march.hours == 31 * 24 - 1  # clocks go forward on 29 March
    assert october.hours == 31 * 24 + 1  # and back on 25 October
    assert march.start == datetime(2026, 2, 28, 23, tzinfo=UTC)


def test_a_period_starts_when_the_day_does_where_dst_skips_midnight():
    # Santiago springs forward at 00:00 on 2026-09-06: that day begins at 01:00 local (-03).
    santiago = ZoneInfo("America/Santiago")
    period = billing.periods(date(2026, 8, 6), 2, santiago)[1]
    assert period.start == datetime(2026, 9, 6, 4, tzinfo=UTC)
    assert period.start.astimezone(santiago).hour == 1
    assert billing.local_midnight(date(2026, 9, 5), santiago) == datetime(2026, 9, 5, 4, tzinfo=UTC)


def test_the_period_at_a_moment_contains_it_and_none_outside_the_term():
    start = date(2026, 1, 15)
    inside = datetime(2026, 2, 14, 15, 59, 59, tzinfo=UTC)
    assert billing.period_at(start, 12, SHANGHAI, inside).index == 0
    assert billing.period_at(start, 12, SHANGHAI, inside + timedelta(seconds=1)).index == 1
    assert billing.period_at(start, 12, SHANGHAI, datetime(2026, 1, 14, tzinfo=UTC)) is None
    assert billing.period_at(start, 1, SHANGHAI, datetime(2026, 3, 1, tzinfo=UTC)) is None


zones = st.sampled_from(["Asia/Shanghai", "Europe/Berlin", "America/New_York",
                         "America/Santiago", "Australia/Sydney", "UTC", "Pacific/Auckland"])


@given(start=st.dates(min_value=date(2000, 1, 1), max_value=date(2090, 12, 31)),
       term=st.integers(min_value=1, max_value=36), zone=zones)
def test_periods_tile_the_term_without_gaps_and_each_lasts_about_a_month(start, term, zone):
    tz = ZoneInfo(zone)
    got = billing.periods(start, term, tz)
    assert len(got) == term
    assert got[0].start == billing.local_midnight(start, tz)
    assert got[-1].end == billing.local_midnight(billing.add_months(start, term), tz)
    for before, after in zip(got, got[1:], strict=False):
        assert before.end == after.start
    for period in got:
        assert 28 * 24 - 1 <= period.hours <= 31 * 24 + 1
        local = period.start.astimezone(tz)
        assert local.day == min(start.day, billing.add_months(start, period.index).day)
        assert local.hour in (0, 1) and local.minute == 0


@given(day=st.dates(min_value=date(2000, 1, 1), max_value=date(2090, 12, 31)), zone=zones)
def test_local_midnight_is_the_first_instant_of_the_local_day(day, zone):
    tz = ZoneInfo(zone)
    first = billing.local_midnight(day, tz)
    assert first.astimezone(tz).date() == day
    assert (first - timedelta(seconds=1)).astimezone(tz).date() < day


def test_hours_between_lists_utc_hour_starts():
    start = datetime(2026, 1, 1, 10, 30, tzinfo=UTC)
    assert billing.hours_between(start, datetime(2026, 1, 1, 12, 0, tzinfo=UTC)) == [
        datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 1, 11, tzinfo=UTC)]


def test_a_period_s_local_dates_are_its_first_and_last_day_on_the_contract_calendar():
    zone = ZoneInfo("Asia/Shanghai")
    first, second = billing.periods(date(2026, 1, 31), 2, zone)
    assert first.local_dates(zone) == (date(2026, 1, 31), date(2026, 2, 27))
    assert second.local_dates(zone) == (date(2026, 2, 28), date(2026, 3, 30))


def test_the_rate_a_line_prints_is_the_rate_it_was_charged_at():
    # 2.3457 x 1.2 = 2.81484: stored to 1e-4 as 2.8148, so it is charged as 2.8148.
    rate = billing.overage_rate(D("2.3457"), None, D("1.2"))
    assert rate == D("2.8148")
    result = billing.period_cost(committed=D("0"), used=D("1000"), committed_rate=D("2.3457"),
                                 overage_rate=rate, currency="CNY")
    assert result.overage_cost == billing.money(result.overage_gpu_hours * rate, "CNY") \
        == D("2814.80")


TERMS = billing.Terms(base_quota_gpus=1, max_quota_gpus=4, committed_gpu_hours=D(100),
                      committed_rate=D("10.00"), overage_rate=D("12.00"), term_months=12,
                      currency="CNY")


def test_late_usage_in_a_period_over_its_commitment_costs_the_overage_rate():
    correction = billing.correction(TERMS, billed=D(100), metered=D(110))
    assert correction.gpu_hours == 10 and correction.amount == D("120.00")
    assert (correction.overage_before_gpu_hours, correction.overage_after_gpu_hours) == (0, 10)


def test_late_usage_that_keeps_a_period_under_its_commitment_costs_nothing():
    correction = billing.correction(TERMS, billed=D(80), metered=D(90))
    assert correction.gpu_hours == 10 and correction.amount == 0


def test_usage_taken_away_from_a_period_is_a_negative_correction():
    correction = billing.correction(TERMS, billed=D(130), metered=D(110))
    assert correction.gpu_hours == -20 and correction.amount == D("-240.00")
    assert billing.correction(TERMS, billed=D(110), metered=D("110.0000001")) is None


@given(committed=hours, rate=money_amounts, multiplier=multipliers,
       usages=st.lists(hours, min_size=1, max_size=6))
def test_corrections_telescope_to_the_cost_of_the_final_usage(committed, rate, multiplier,
                                                              usages):
    """Billing a period once, then a correction each time its usage changes, bills in all the
    cost of its final usage, to the cent; each printed line is rate x GPU-hours."""
    terms = billing.Terms(base_quota_gpus=0, max_quota_gpus=1, committed_gpu_hours=committed,
                          committed_rate=billing.rate(rate),
                          overage_rate=billing.overage_rate(billing.rate(rate), None, multiplier),
                          term_months=1, currency="CNY")
    billed_hours, billed_money = usages[0], terms.cost(usages[0]).total
    for usage in usages[1:]:
        correction = billing.correction(terms, billed=billed_hours, metered=usage)
        if correction is None:
            continue
        assert correction.overage_after_cost == billing.money(
            correction.overage_after_gpu_hours * terms.overage_rate, "CNY")
        assert correction.overage_before_cost == billing.money(
            correction.overage_before_gpu_hours * terms.overage_rate, "CNY")
        billed_hours, billed_money = correction.billed_after_gpu_hours, (
            billed_money + correction.amount)
    assert billed_money == terms.cost(usages[-1]).total


@pytest.mark.parametrize(("currency", "amount", "billed"), [
    ("JPY", "124.07", "124"), ("KWD", "0.0375", "0.038"), ("BHD", "0.3145", "0.315"),
    ("CNY", "0.105", "0.11"), ("CLF", "1.00005", "1.0001"),
])
def test_money_is_rounded_to_each_currencys_minor_unit(currency, amount, billed):
    """Every currency was rounded to cents: JPY 124.07 (no yen has cents), KWD 0.04 (a dinar
    has a thousand fils)."""
    assert billing.money(D(amount), currency) == D(billed)
    assert str(billing.money(D(amount), currency)) == billed


def test_a_period_in_yen_is_billed_in_whole_yen():
    result = billing.period_cost(committed=D("10"), used=D("10.3333335"),
                                 committed_rate=D("12.4070"), overage_rate=D("15"),
                                 currency="JPY")
    assert (result.committed_cost, result.overage_cost) == (D("124"), D("5"))
