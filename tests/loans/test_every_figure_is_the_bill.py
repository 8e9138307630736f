"""Every figure a lead reads is the bill (DESIGN "Every surface reads the ledger"): the cards,
the periods table and its CSV, the burn-down API, the fleet's rows and the alerts price a
period as its statement bills it, sharing and the upfront fee included. Each test failed on
the code before loans.services.bills, which priced hours at the terms alone.

The story: vision commits 100 GPU-h at 10.00 (overage 12.00) with an upfront fee of 500.00;
nlp commits 600 GPU-h at 5.00 and uses none; they share a group from January."""

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from loans.models import Alert, Membership, OveragePolicy, Statement
from loans.services import bills, ledger
from loans.services.alerts import evaluate_alerts
from tests.conftest import make_user
from tests.ledger import FEB, GRACE, JAN, long_retention, meter  # noqa: F401
from tests.loans.test_sharing_fair import close, grouped, signed

D = Decimal
pytestmark = [pytest.mark.usefixtures("long_retention"), pytest.mark.django_db]
WEEK_IN = JAN + timedelta(days=7)


@pytest.fixture
def story(client):
    vision = signed("vision", committed="100", rc="10", ro="12", fee="500")
    nlp = signed("nlp", committed="600", rc="5", ro="6")
    group = grouped(vision, nlp)
    lead = make_user("vision-lead")
    Membership.objects.create(user=lead, tenant=vision.tenant, role=Membership.Role.LEAD)
    client.force_login(lead)
    return vision, nlp, group


def cards(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-figure="([^"]+)">([^<]*)<', html))


def test_a_stated_period_shows_its_statement_on_every_surface(client, story):
    """vision used 150 GPU-h in January and borrowed 50 of nlp's at 5.00: its statement bills
    500.00 + 1,000.00 + 250.00. The card said 2,100.00 (50 GPU-h at the overage rate), the
    periods table Overage 50.0."""
    vision, _nlp, _group = story
    meter("vision", JAN, 150)
    close(FEB + GRACE)
    statement = Statement.objects.get(contract=vision, period_index=0)
    assert statement.total_cost == D("1750.00")
    with time_machine.travel(FEB + timedelta(days=3), tick=False):
        html = client.get("/en/tenants/vision/?period=1").content.decode()
        body = client.get(f"/api/v1/contracts/{vision.pk}/burndown?period=1").json()
        table = client.get("/en/tenants/vision/periods.csv").content.decode()
    assert cards(html)["cost"] == "1,750.00"
    assert cards(html)["borrowed"] == "50.0" and "overage" not in cards(html)
    assert 'data-total="1750.0000"' in html and 'data-overage="0.000000"' in html
    assert body["cost_so_far"]["total"] == "1750.00"
    assert body["cost_so_far"]["stated"] is True
    assert body["cost_so_far"]["borrowed_gpu_hours"] == "50.000000"
    [row] = [r for r in csv.DictReader(io.StringIO(table)) if r["period"] == "1"]
    assert (row["total_cost"], row["overage_gpu_hours"], row["borrowed_gpu_hours"],
            row["upfront_fee"]) == ("1750.00", "0.0", "50.0", "500.00")


def test_the_whole_contract_is_its_statements_with_the_fee_and_what_is_not_stated(
        client, story):
    vision, _nlp, _group = story
    meter("vision", JAN, 150)
    close(FEB + GRACE)
    meter("vision", FEB, 24)
    at = FEB + timedelta(days=3)
    with time_machine.travel(at, tick=False):
        html = client.get("/en/tenants/vision/?period=all").content.decode()
        whole = bills.whole(ledger.read(vision, at))
    # January as stated (fee included), February so far: its commitment, 24 GPU-h used.
    assert whole.total == D("1750.00") + D("1000.00")
    assert cards(html)["cost"] == "2,750.00"
    assert "the upfront fee of 500.00 CNY included" in html


def test_the_open_period_is_priced_with_sharing_so_far_and_at_its_projection(client, story):
    """A week in, vision is past its commitment and nlp has used nothing: sharing covers all
    of it at nlp's 5.00. The card priced it at 12.00, and the projection too, while the pool
    card on the same page said the group covers it."""
    vision, _nlp, _group = story
    meter("vision", JAN, 150)
    with time_machine.travel(WEEK_IN, tick=False):
        response = client.get("/en/tenants/vision/")
    html, context = response.content.decode(), response.context
    bill, projected = context["bill"], context["projected"]
    assert (bill.borrowed_gpu_hours, bill.overage_cost) == (D(50), D(0))
    assert cards(html)["cost"] == "1,750.00"  # fee, commitment, 50 GPU-h at 5.00
    assert projected.overage_cost == 0 and projected.borrowed_gpu_hours > 50
    assert projected.borrowed_gpu_hours == projected.past_commitment_gpu_hours
    assert projected.total == D("1500.00") + (projected.borrowed_gpu_hours * 5).quantize(
        D("0.01"))
    assert cards(html)["projected-cost"] == f"{projected.total:,.2f}"
    # The commitment ran out on January 5th: said so in the past tense.
    assert "Commitment ran out" in html and "Commitment runs out" not in html


def test_the_fleet_and_the_alerts_read_the_overage_after_sharing(client, story):
    vision, _nlp, _group = story
    meter("vision", JAN, 150)
    client.force_login(make_user("ops", staff=True))
    with time_machine.travel(WEEK_IN, tick=False):
        rows = {r["tenant"]: r for r in csv.DictReader(io.StringIO(
            client.get("/en/fleet.csv").content.decode()))}
        evaluate_alerts(WEEK_IN)
    assert rows["vision"]["projected_overage_cost"] == "0.00"
    # nlp lends what vision borrows: its waste is what is neither used nor lent.
    alert = Alert.objects.get(kind="projected_overage")
    assert "partners' commitments cover" in alert.message
    assert alert.details["projected_overage_cost"] == "0.00"


def test_the_policy_card_shows_the_policy_saved_while_the_commitment_ran_out(client, story):
    """The run-out card's `{% blocktranslate asvar overage %}` overwrote the policy the card
    below reads: a saved budget showed as "Overage allowed", and saving again set it back."""
    vision, _nlp, _group = story
    meter("vision", JAN, 150)
    OveragePolicy.objects.create(contract=vision, kind="budget", budget=D("5000"),
                                 set_at=JAN + timedelta(days=6))
    with time_machine.travel(WEEK_IN, tick=False):
        html = client.get("/en/tenants/vision/").content.decode()
    assert 'data-policy="budget"' in html
    assert '<option value="budget" selected>' in html


def test_a_past_period_shows_its_own_statement_and_not_the_pool_now(client, story):
    vision, _nlp, _group = story
    meter("vision", JAN, 150)
    close(FEB + GRACE)
    meter("vision", FEB, 30 * 24)
    close(datetime(2026, 3, 1, tzinfo=UTC) + GRACE)
    with time_machine.travel(datetime(2026, 3, 3, tzinfo=UTC), tick=False):
        past = client.get("/en/tenants/vision/?period=1").content.decode()
        now = client.get("/en/tenants/vision/").content.decode()
    assert 'id="pool"' not in past and 'id="pool"' in now
    shown = re.findall(r'<tbody data-statement="(\d+)">', past)
    assert shown == [str(Statement.objects.get(contract=vision, period_index=0).pk)]
    assert len(re.findall(r'<tbody data-statement="(\d+)">', now)) == 2
