"""Buy vs loan: the worked example pinned exactly, on the page and through the API; inputs
validated with clear errors; access."""

from decimal import Decimal

import pytest

from loans.maths import buyvsloan
from tests.story import NOW, START, expected_hours

EXAMPLE = {"gpus": "8", "price_per_gpu": "200000", "overhead_per_gpu_year": "20000",
           "maintenance_percent": "10", "depreciation_years": "4", "utilisation_percent": "50",
           "months": "12", "target": "contract"}


def test_the_worked_example():
    # 8 GPUs at 200,000: 50,000 depreciation + 20,000 overhead + 20,000 maintenance a GPU-year.
    purchase = buyvsloan.Purchase(8, Decimal(200_000), Decimal(20_000), Decimal("0.1"), 4)
    loan = buyvsloan.Loan("H100 Guaranteed 8", Decimal(1000), Decimal(10), Decimal(12))
    result = buyvsloan.compare(purchase, loan, Decimal("0.5"), 12)
    assert purchase.yearly_cost() == Decimal(720_000)
    assert result.used_gpu_hours_per_month == Decimal(2920)  # 8 x 730 h x 50%
    assert loan.monthly_cost(Decimal(2920)) == Decimal("33040.00")  # 10,000 + 1,920 x 12
    assert result.loan_per_year == Decimal("396480.00")
    assert result.buy_per_used_gpu_hour == Decimal("20.5479")  # 720,000 / 35,040
    assert result.loan_per_used_gpu_hour == Decimal("11.3151")  # 33,040 / 2,920
    # Owning costs 60,000 a month: the loan reaches it at 1,000 + 50,000 / 12 GPU-hours.
    assert result.break_even_utilisation == Decimal("0.8847")
    assert result.cheaper == "loan"
    assert result.buy_cumulative[0] == Decimal("1600000.00")  # bought up front
    assert result.buy_cumulative[12] == Decimal("1600000.00") + 8 * 40_000
    assert result.loan_cumulative[12] == Decimal("396480.00")


def test_buying_cheap_enough_pays_at_any_use_and_dear_enough_never():
    loan = buyvsloan.Loan("x", Decimal(1000), Decimal(10), Decimal(12))
    cheap = buyvsloan.Purchase(1, Decimal(1000), Decimal(0), Decimal(0), 10)
    dear = buyvsloan.Purchase(1, Decimal(10_000_000), Decimal(0), Decimal(0), 1)
    assert buyvsloan.break_even(cheap, loan) == 0
    assert buyvsloan.break_even(dear, loan) is None


def test_the_page_shows_the_worked_example(client, lead, contract):
    client.force_login(lead)
    response = client.get("/en/tenants/vision/buy-vs-loan/", EXAMPLE)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-figure="buy-per-hour">20.55<' in html
    assert 'data-figure="loan-per-hour">11.32<' in html
    assert 'data-figure="break-even">88.5%<' in html
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
    assert body["loan_per_year"] == "396480.00"
    assert body["break_even_utilisation"] == "0.8847"
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
