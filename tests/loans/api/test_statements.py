"""Statements over the API as a finance team reads them (JSON, CSV, FOCUS 1.2), and the
operators' amendments and terminations over the API."""

import csv
import io
import subprocess
from datetime import date, timedelta
from decimal import Decimal

import pytest
import time_machine

from loans.models import Amendment, Contract, Plan
from loans.services import exports
from loans.services.exports.focus import COLUMNS as FOCUS_COLUMNS
from loans.services.ledger.closing import close_due_periods
from tests.ledger import (
    FEB,
    GRACE,
    JAN,
    MAR,
    attribute,
    meter,
)

D = Decimal

@pytest.fixture
def billed(tenant, db):
    """Period 1: 130 GPU-h of a 100 GPU-h commitment; 10 late GPU-h corrected on period 2."""
    attribute(tenant)
    plan = Plan.objects.create(name="Small", base_quota_gpus=1, max_quota_gpus=2,
                               committed_gpu_hours=D(100), committed_rate=D("10.00"),
                               overage_rate=D("12.00"), term_months=3, currency="CNY")
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 1, 1), time_zone="UTC",
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    meter("vision", JAN, 130)
    with time_machine.travel(FEB + GRACE, tick=False):
        close_due_periods(FEB + GRACE)
    meter("vision", JAN + timedelta(days=5), 10, gpu_prefix="LATE", at=FEB + GRACE)
    meter("vision", FEB, 40)
    with time_machine.travel(MAR + GRACE, tick=False):
        close_due_periods(MAR + GRACE)
    return contract


def get(client, user, contract, query=""):
    client.force_login(user)
    with time_machine.travel(MAR + timedelta(days=1), tick=False):
        return client.get(f"/api/v1/contracts/{contract.pk}/statements{query}")


def test_statements_list_every_line_with_the_terms_they_were_priced_with(client, lead, billed):
    body = get(client, lead, billed).json()
    first, second = body["statements"]
    assert first["terms"] == {"committed_gpu_hours": "100.000000", "committed_rate": "10.0000",
                              "overage_rate": "12.0000", "base_quota_gpus": 1,
                              "max_quota_gpus": 2}
    assert [(line["kind"], line["gpu_hours"], line["rate"], line["amount"])
            for line in first["lines"]] == [
        ("commitment", "100.000000", "10.0000", "1000.00"),
        ("overage", "30.000000", "12.0000", "360.00")]
    assert first["total"] == "1360.00"
    correction = second["lines"][2]
    assert correction["kind"] == "correction" and correction["corrects_period"] == 1
    assert correction["overage_before"] == {"gpu_hours": "30.000000", "amount": "360.00"}
    assert correction["overage_after"] == {"gpu_hours": "40.000000", "amount": "480.00"}
    assert correction["amount"] == "120.00" and second["total"] == "1120.00"
    assert body["billed_total"] == "2480.00" and body["pending_corrections"] == []


def test_every_line_is_rate_times_gpu_hours_and_lines_add_up_to_the_statement(
        client, lead, billed):
    for statement in get(client, lead, billed).json()["statements"]:
        total = D(0)
        for line in statement["lines"]:
            if line["kind"] == "correction":
                for side in ("overage_before", "overage_after"):
                    figures = line[side]
                    assert D(figures["amount"]) == (D(figures["gpu_hours"]) * D(line["rate"])
                                                    ).quantize(D("0.01"))
            else:
                assert D(line["amount"]) == (D(line["gpu_hours"]) * D(line["rate"])).quantize(
                    D("0.01"))
            total += D(line["amount"])
        assert total == D(statement["total"])


def test_the_statements_export_as_csv_one_row_per_line(client, lead, billed):
    response = get(client, lead, billed, "?format=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["statement"], r["line"], r["amount"]) for r in rows] == [
        ("1", "commitment", "1000.00"), ("1", "overage", "360.00"),
        ("2", "commitment", "1000.00"), ("2", "overage", "0.00"), ("2", "correction", "120.00")]
    assert rows[-1]["corrects_period"] == "1"


def test_the_focus_export_names_its_columns_and_bills_what_the_statements_bill(
        client, lead, billed):
    contract = billed
    response = get(client, lead, billed, "?format=focus")
    reader = csv.DictReader(io.StringIO(response.content.decode()))
    assert tuple(reader.fieldnames) == FOCUS_COLUMNS
    rows = list(reader)
    assert sum(D(r["BilledCost"]) for r in rows) == D("2480.00")
    billed, effective = {}, {}
    for r in rows:
        billed[r["InvoiceId"]] = billed.get(r["InvoiceId"], D(0)) + D(r["BilledCost"])
        effective[r["InvoiceId"]] = effective.get(r["InvoiceId"], D(0)) + D(r["EffectiveCost"])
    totals = {f"{contract.pk}-1": D("1360.00"), f"{contract.pk}-2": D("1120.00")}
    assert billed == totals and effective == totals
    purchases = [r for r in rows if r["ChargeCategory"] == "Purchase"]
    assert [(r["BilledCost"], r["EffectiveCost"], r["ChargeFrequency"], r["PricingQuantity"])
            for r in purchases] == [("1000.00", "0.00", "Recurring", "100.000000")] * 2
    used = [r for r in rows if r["CommitmentDiscountStatus"] == "Used"]
    unused = [r for r in rows if r["CommitmentDiscountStatus"] == "Unused"]
    assert [r["CommitmentDiscountQuantity"] for r in used] == ["100.000000", "40.000000"]
    assert [(r["CommitmentDiscountQuantity"], r["BilledCost"], r["EffectiveCost"])
            for r in unused] == [("60.000000", "0.00", "600.00")]
    [correction] = [r for r in rows if r["ChargeClass"] == "Correction"]
    assert correction["ChargePeriodStart"] == "2026-01-01T00:00:00Z"  # the period corrected
    assert correction["BillingPeriodStart"] == "2026-02-01T00:00:00Z"  # billed in period 2
    assert (correction["BilledCost"], correction["PricingQuantity"]) == ("120.00", "10.000000")
    assert not correction["CommitmentDiscountId"]  # overage: at the overage rate
    # No overage row where there was none (period 2), and a unit wherever there is a quantity.
    assert len([r for r in rows if r["PricingCategory"] == "Standard"]) == 2
    assert all((r["ConsumedUnit"] == "GPU-Hours") == bool(r["ConsumedQuantity"]) for r in rows)
    assert {r["PricingUnit"] for r in rows} == {"GPU-Hours"}
    assert {r["SubAccountId"] for r in rows} == {f"contract-{contract.pk}"}


def test_a_refusal_stays_json_whatever_format_was_asked_for(client, outsider, billed):
    response = get(client, outsider, billed, "?format=focus")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def post(client, user, path, body):
    client.force_login(user)
    with time_machine.travel(FEB + timedelta(days=5), tick=False):
        return client.post(path, body, content_type="application/json")


def test_an_operator_amends_from_an_open_period_and_a_closed_one_is_refused(
        client, operator, lead, billed):
    path = f"/api/v1/contracts/{billed.pk}/amendments"
    refused = post(client, operator, path, {"from_period": 1, "changes": {
        "committed_gpu_hours": "90"}, "reason": "r"})
    assert refused.status_code == 400 and "period 3 to 3" in str(refused.json()["from_period"])
    odd = post(client, operator, path, {"from_period": 3, "changes": {"term_months": 24},
                                        "reason": "r"})
    assert odd.status_code == 400 and "cannot be amended" in str(odd.json())
    bad = post(client, operator, path, {"from_period": 3, "changes": {
        "max_quota_gpus": "0"}, "reason": "r"})
    assert bad.status_code == 400 and "at least one GPU" in str(bad.json())
    done = post(client, operator, path, {"from_period": 3, "changes": {
        "committed_gpu_hours": "90"}, "reason": "less work in March"})
    assert done.status_code == 201, done.content
    assert done.json()["from_period"] == 3 and done.json()["author"] == operator.username
    assert post(client, lead, path, {"from_period": 3, "changes": {}, "reason": "r"}
                ).status_code == 403
    listed = client.get(path).json()
    assert [a["changes"] for a in listed] == [{"committed_gpu_hours": ["100.00", "90.00"]}]


def test_an_operator_terminates_a_contract_at_the_end_of_its_current_period(
        client, operator, billed):
    path = f"/api/v1/contracts/{billed.pk}/terminate"
    assert post(client, operator, path, {}).status_code == 400  # a reason is required
    response = post(client, operator, path, {"reason": "team disbanded"})
    assert response.status_code == 201, response.content
    billed.refresh_from_db()
    assert billed.term_months == 2 and billed.window_end == MAR
    assert Amendment.objects.get().kind == "termination"
    again = post(client, operator, path, {"reason": "twice"})
    assert again.status_code == 400 and "already ends" in str(again.json())


def test_a_negative_amount_in_the_focus_export_is_a_number_not_text():
    data = {"columns": FOCUS_COLUMNS, "rows": [
        ["-600.00" if c in ("BilledCost", "EffectiveCost") else "" for c in FOCUS_COLUMNS]]}
    [row] = csv.DictReader(io.StringIO(exports.csv_text(data)))
    assert (row["BilledCost"], row["EffectiveCost"]) == ("-600.00", "-600.00")
    assert sum(D(row[c]) for c in ("BilledCost", "EffectiveCost")) == D("-1200.00")


@pytest.mark.parametrize(("currency", "total", "overage"), [
    ("KWD", "21.385", "1.385"), ("JPY", "21", "1"), ("CNY", "21.39", "1.39")])
def test_a_statement_bills_in_its_currencys_minor_unit(client, lead, tenant, currency, total,
                                                       overage):
    """Rounded to cents whatever the currency, a KWD statement lost its third place and a JPY
    one billed fractions of a yen."""
    attribute(tenant)
    plan = Plan.objects.create(name="Fils", base_quota_gpus=1, max_quota_gpus=2,
                               committed_gpu_hours=D(100), committed_rate=D("0.2000"),
                               overage_rate=D("0.2770"), term_months=1, currency=currency)
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 1, 1), time_zone="UTC",
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    meter("vision", JAN, 105)  # 5 GPU-h of overage at 0.277: 1.385
    with time_machine.travel(FEB + GRACE, tick=False):
        close_due_periods(FEB + GRACE)
    [statement] = get(client, lead, contract).json()["statements"]
    assert statement["total"] == total
    assert [line["amount"] for line in statement["lines"]] == [
        "20" if currency == "JPY" else f"20.{'0' * len(total.split('.')[1])}", overage]
    focus = list(csv.DictReader(io.StringIO(get(client, lead, contract, "?format=focus")
                                            .content.decode())))
    assert sum(D(r["BilledCost"]) for r in focus) == D(total)
    # FOCUS writes a decimal point even in yen (1.0): cost columns are decimals.
    assert [D(r["BilledCost"]) for r in focus if r["PricingCategory"] == "Standard"] == [
        D(overage)]


def pdf_text(body: bytes) -> str:
    """The PDF's text as pdftotext (Debian's poppler-utils) extracts it, thousands
    separators dropped."""
    done = subprocess.run(["pdftotext", "-layout", "-", "-"], input=body, capture_output=True,
                          check=True)
    return done.stdout.decode().replace(",", "")


def api_figures(statement: dict) -> list[str]:
    """Every figure of one statement of the statements API, as the page prints it: amounts
    to the cent, GPU-hours to two places, rates as stored."""
    found = [statement["total"], f"{Decimal(statement['allocated_gpu_hours']):.2f}"]
    for line in statement["lines"]:
        found += [line["amount"], f"{Decimal(line['gpu_hours']):.2f}", line["rate"]]
        if line["kind"] == "correction":
            found += [f"{Decimal(line['overage_before']['gpu_hours']):.2f}",
                      f"{Decimal(line['overage_after']['gpu_hours']):.2f}"]
    return found


@pytest.mark.parametrize(("lang", "words"), [("en", ("Commitment", "Total", "Correction of")),
                                              ("zh-hans", ("承诺量", "合计", "的更正"))])
def test_the_pdf_holds_every_figure_of_the_statements_api(client, lead, billed, lang, words):
    body = get(client, lead, billed).json()
    printed = get(client, lead, billed, f"?format=pdf&lang={lang}")
    assert printed.status_code == 200 and printed["Content-Type"] == "application/pdf"
    assert printed["Content-Disposition"] == (
        f'attachment; filename="vision-contract-{billed.pk}-statements.pdf"')
    text = pdf_text(printed.content)
    for statement in body["statements"]:
        missing = [f for f in api_figures(statement) if f not in text]
        assert missing == [], (lang, statement["number"], missing)
    assert all(word in text for word in words), (lang, text[:400])


def test_one_periods_pdf_by_accept_header_and_bad_languages_answer_json(client, lead, billed):
    client.force_login(lead)
    with time_machine.travel(MAR + timedelta(days=1), tick=False):
        one = client.get(f"/api/v1/contracts/{billed.pk}/statements?period=1",
                         HTTP_ACCEPT="application/pdf", HTTP_ACCEPT_LANGUAGE="zh-hans")
        bad = client.get(f"/api/v1/contracts/{billed.pk}/statements?format=pdf&lang=xx")
    assert one.status_code == 200 and one["Content-Type"] == "application/pdf"
    assert one["Content-Disposition"].endswith('period-1.pdf"')
    text = pdf_text(one.content)
    assert "1360.00" in text and "1120.00" in text  # period 1's and the one correcting it
    assert bad.status_code == 400 and bad["Content-Type"] == "application/json"
    assert "lang must be one of en, zh-hans" in bad.json()["lang"][0]
