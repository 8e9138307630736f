"""Buy vs loan: the worked example pinned exactly, on the page and through the API; inputs
validated with clear errors; access."""

from datetime import date
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.maths import buyvsloan
from loans.models import Contract
from tests.story import NOW, START, expected_hours
from tests.tiers import examples

EXAMPLE = {"gpus": "8", "price_per_gpu": "200000", "overhead_per_gpu_year": "20000",
           "maintenance_percent": "10", "depreciation_years": "4", "utilisation_percent": "50",
           "months": "12", "target": "contract"}


def test_the_worked_example():
    # 8 GPUs at 200,000 written off over 4 years: 400,000 in 12 months; overhead 20,000 and
    # maintenance 20,000 a GPU-year: 320,000. 720,000 over the 12 months.
    purchase = buyvsloan.Purchase(8, Decimal(200_000), Decimal(20_000), Decimal("0.1"), 4)
    loan = buyvsloan.Loan("H100 Guaranteed 8", Decimal(1000), Decimal(10), Decimal(12))
    result = buyvsloan.compare(purchase, loan, Decimal("0.5"), 12, currency="CNY")
    assert result.used_gpu_hours_per_month == Decimal(2920)  # 8 x 730 h x 50%
    assert loan.monthly_cost(Decimal(2920), "CNY") == Decimal("33040.00")  # 10,000 + 1,920 x 12
    assert result.buy_total == Decimal("720000.00")
    assert result.loan_total == Decimal("396480.00")
    assert result.buy_per_used_gpu_hour == Decimal("20.5479")  # 720,000 / 35,040
    assert result.loan_per_used_gpu_hour == Decimal("11.3151")  # 396,480 / 35,040
    # The loan reaches 720,000 in 12 months at 1,000 + 600,000 / (12 x 12) GPU-hours a month.
    assert result.break_even_utilisation == Decimal("0.8848")
    assert result.cheaper == "loan"
    assert result.cash_up_front == Decimal("1600000.00")
    assert result.value_left == Decimal("1200000.00")
    assert result.buy_cumulative[0] == 0 and result.buy_cumulative[12] == result.buy_total
    assert result.loan_cumulative[12] == result.loan_total


def test_the_verdict_the_break_even_and_the_chart_answer_one_question():
    """On main this read "Cheaper: buying, break-even 0.0%" (a year's depreciation against a
    year of the loan) beside a chart of cash where buying had cost 1.92M by month 12 (the
    price up front) against the loan's 1.20M."""
    purchase = buyvsloan.Purchase(8, Decimal(230_000), Decimal(5_000), Decimal("0.02"), 6)
    loan = buyvsloan.Loan("x", Decimal(5000), Decimal(20), Decimal(25))
    result = buyvsloan.compare(purchase, loan, Decimal("0.6"), 12, currency="CNY")
    assert result.cheaper == ("buy" if result.buy_cumulative[-1] < result.loan_cumulative[-1]
                              else "loan")
    assert result.break_even_utilisation == 0 and result.cheaper == "buy"
    assert result.buy_cumulative[-1] == result.buy_total < result.loan_total


money = st.decimals(min_value=0, max_value=10**6, places=2)


@given(gpus=st.integers(1, 64), price=money, overhead=money,
       maintenance=st.decimals(min_value=0, max_value=Decimal("0.3"), places=3),
       years=st.integers(1, 10), committed=st.decimals(min_value=0, max_value=50_000, places=1),
       rate=st.decimals(min_value=0, max_value=100, places=2),
       markup=st.decimals(min_value=1, max_value=3, places=2),
       fee=money, utilisation=st.decimals(min_value=Decimal("0.001"), max_value=1, places=3),
       months=st.integers(1, 120))
@settings(max_examples=examples(300), deadline=None)
def test_every_figure_compares_the_same_two_costs_over_the_same_months(
        gpus, price, overhead, maintenance, years, committed, rate, markup, fee, utilisation,
        months):
    purchase = buyvsloan.Purchase(gpus, price, overhead, maintenance, years)
    loan = buyvsloan.Loan("x", committed, rate, rate * markup, fee)
    result = buyvsloan.compare(purchase, loan, utilisation, months, currency="CNY")
    # The chart ends where the totals are, and the verdict reads them.
    assert result.buy_cumulative[-1] == result.buy_total
    assert result.loan_cumulative[-1] == result.loan_total
    assert len(result.month) == months + 1 and result.buy_cumulative[0] == 0
    assert result.loan_cumulative[0] == loan.upfront_fee
    assert result.cheaper == ("buy" if result.buy_total < result.loan_total else "loan")
    # Brute force: the loan over the months at this utilisation, month by month.
    used = buyvsloan.used_per_month(gpus, utilisation)
    assert result.loan_total == buyvsloan.money(fee + sum(
        loan.monthly_cost(used, "CNY") for _ in range(months)), "CNY")
    # The break-even utilisation splits the verdict: at or above it buying costs no more (up to
    # a cent a month of rounding), below it the loan costs less.
    even = result.break_even_utilisation
    slack = Decimal("0.01") * months + Decimal("0.01")
    if even is None:
        assert result.loan_total <= result.buy_total + slack
    elif utilisation >= even:
        assert result.buy_total <= result.loan_total + slack
    else:
        assert result.loan_total <= result.buy_total + slack
    # Owning never loses more than the price, and what it lost plus what is left is the price.
    assert abs(result.value_left + purchase.written_off(months) - purchase.price) \
        <= Decimal("0.005")


def test_buying_cheap_enough_pays_at_any_use_and_dear_enough_never():
    loan = buyvsloan.Loan("x", Decimal(1000), Decimal(10), Decimal(12))
    cheap = buyvsloan.Purchase(1, Decimal(1000), Decimal(0), Decimal(0), 10)
    dear = buyvsloan.Purchase(1, Decimal(10_000_000), Decimal(0), Decimal(0), 1)
    assert buyvsloan.break_even(cheap, loan, 12, "CNY") == 0
    assert buyvsloan.break_even(dear, loan, 12, "CNY") is None


def test_upfront_fees_count_the_contracts_own_too(client, lead, tenant, plan):
    signed = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1),
                      time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE,
                      upfront_fee=Decimal("50000"))
    signed.full_clean()
    signed.save()
    client.force_login(lead)
    body = client.get("/api/v1/tenants/vision/buy-vs-loan", EXAMPLE).json()
    assert body["loan_total"] == "446480.00"  # 50,000 + 12 x 33,040


def test_the_page_shows_the_worked_example(client, lead, contract):
    client.force_login(lead)
    response = client.get("/en/tenants/vision/buy-vs-loan/", EXAMPLE)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-figure="buy-per-hour">20.55<' in html
    assert 'data-figure="loan-per-hour">11.32<' in html
    assert 'data-figure="break-even">88.5%<' in html
    assert "Over the next 12 months, which costs less for 8 GPUs" in html
    names = [t["name"] for t in response.context["chart"]["data"]]
    assert names == ["Buy", "Loan"]


def test_the_page_opens_with_defaults_and_no_usage_assumes_60_percent(client, lead, contract):
    client.force_login(lead)
    response = client.get("/en/tenants/vision/buy-vs-loan/")
    assert response.status_code == 200
    assert response.context["form"].cleaned_data["utilisation_percent"] == 60
    assert response.context["form"].cleaned_data["gpus"] == 8  # the base quota
    assert "No usage measured yet" in response.content.decode()


def test_the_api_gives_the_same_figures(client, lead, contract, plan):
    client.force_login(lead)
    body = client.get("/api/v1/tenants/vision/buy-vs-loan", EXAMPLE).json()
    assert body["currency"] == "CNY" and body["loan"] == "H100 Guaranteed 8"
    assert body["buy_per_used_gpu_hour"] == "20.5479"
    assert body["months"] == 12 and body["loan_total"] == "396480.00"
    assert body["buy_total"] == "720000.00" and body["cash_up_front"] == "1600000.00"
    assert body["break_even_utilisation"] == "0.8848"
    other = client.get("/api/v1/tenants/vision/buy-vs-loan",
                       {**EXAMPLE, "target": str(plan.pk)}).json()
    assert other["loan"] == plan.name


@pytest.mark.parametrize(("field", "value", "message"), [
    ("gpus", "0", "greater than or equal to 1"),
    ("price_per_gpu", "-5", "greater than or equal to 0"),
    ("utilisation_percent", "150", "less than or equal to 100"),
    ("depreciation_years", "many", "Enter a whole number"),
    ("target", "999999", "Select a valid choice"),
    ("months", "1e9", "Enter a whole number"),
])
def test_bad_inputs_get_field_errors(client, lead, contract, field, value, message):
    client.force_login(lead)
    page = client.get("/en/tenants/vision/buy-vs-loan/", {**EXAMPLE, field: value})
    assert page.status_code == 400 and message in page.content.decode()
    api = client.get("/api/v1/tenants/vision/buy-vs-loan", {**EXAMPLE, field: value})
    assert api.status_code == 400
    assert message in api.json()[field][0]["message"]


def test_another_tenant_s_comparison_is_unknown(client, outsider, contract):
    client.force_login(outsider)
    assert client.get("/en/tenants/vision/buy-vs-loan/").status_code == 404
    assert client.get("/api/v1/tenants/vision/buy-vs-loan").status_code == 404


def test_the_utilisation_defaults_to_what_the_meter_measured(client, lead, contract, metered):
    used = sum(h.allocated_gpu_hours for h in expected_hours())
    hours = (NOW - START).total_seconds() / 3600
    client.force_login(lead)
    response = client.get("/en/tenants/vision/buy-vs-loan/")
    measured = response.context["form"].cleaned_data["utilisation_percent"]
    assert float(measured) == pytest.approx(100 * used / (8 * hours), abs=0.05)
    assert "Measured: your allocated GPU-hours" in response.content.decode()
