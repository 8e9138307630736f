"""Sharing groups over the API: operators create groups and move contracts in and out from a
period not begun; a contract of another calendar or currency is refused with the reason; a
lead reads its own group's members and totals, never another group; nothing else writes."""

import json
import re
import subprocess
from datetime import date, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from loans.models import Contract, Plan, SharingGroup, SharingMember, Statement, Tenant
from loans.services.ledger.closing import close_due_periods
from tests.ledger import GRACE, JAN, attribute, long_retention, meter, node  # noqa: F401

D = Decimal
pytestmark = pytest.mark.usefixtures("long_retention")


def signed(tenant: Tenant, *, zone="Asia/Shanghai", currency="CNY", day=1,
           committed="100") -> Contract:
    plan = Plan.objects.create(name=f"P{Plan.objects.count()}", base_quota_gpus=1,
                               max_quota_gpus=4, committed_gpu_hours=D(committed),
                               committed_rate=D("10"), term_months=12, currency=currency)
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 11, day),
                        time_zone=zone, status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


@pytest.fixture
def pair(contract, other_tenant):
    return contract, signed(other_tenant)


def post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_an_operator_creates_a_group_and_a_contract_with_no_statement_joins_from_its_first(
        client, operator, pair):
    vision, speech = pair
    client.force_login(operator)
    response = post(client, "/api/v1/sharing-groups/",
                    {"name": "org", "currency": "CNY", "contracts": [vision.pk, speech.pk]})
    assert response.status_code == 201, response.content
    body = response.json()
    assert [(m["contract"], m["from"], m["until"], m["added_by"]) for m in body["members"]] == [
        (c.pk, c.periods()[0].start.isoformat(), None, "operator") for c in (vision, speech)]
    assert body["statements"] == []


@pytest.mark.parametrize(("change", "says"), [
    ({"zone": "UTC"}, "do not begin and end with those of contract"),
    ({"day": 2}, "do not begin and end with those of contract"),
    ({"currency": "USD"}, "is billed in USD; the group org is in CNY"),
])
def test_a_contract_of_another_calendar_or_currency_is_refused_and_nothing_is_made(
        client, operator, contract, other_tenant, change, says):
    other = signed(other_tenant, **change)
    client.force_login(operator)
    response = post(client, "/api/v1/sharing-groups/",
                    {"name": "org", "currency": "CNY", "contracts": [contract.pk, other.pk]})
    assert response.status_code == 400
    assert says in json.dumps(response.json())
    assert not SharingMember.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "org", "currency": "cny"}, "currency"),
    ({"name": "", "currency": "CNY"}, "name"),
    ({"name": "org", "currency": "CNY", "contracts": ["x"]}, "contracts"),
    ({"name": "org", "currency": "CNY", "contracts": [999999]}, "contracts"),
])
def test_a_malformed_group_is_a_precise_400(client, operator, contract, body, field):
    client.force_login(operator)
    response = post(client, "/api/v1/sharing-groups/", body)
    assert response.status_code == 400
    assert field in response.json()


def test_a_contract_with_statements_joins_and_leaves_from_its_next_period(
        client, operator, pair):
    vision, speech = pair
    client.force_login(operator)
    group = post(client, "/api/v1/sharing-groups/",
                 {"name": "org", "currency": "CNY", "contracts": [speech.pk]}).json()
    first, second, third = vision.periods()[:3]
    Statement.objects.create(
        contract=vision, period_index=0, period_start=first.start, period_end=first.end,
        committed_gpu_hours=D(1000), allocated_gpu_hours=0, busy_gpu_hours=0,
        overage_gpu_hours=0, unused_gpu_hours=D(1000), committed_rate=D(10),
        overage_rate=D(12), committed_cost=D(10000), overage_cost=0, total_cost=D(10000),
        currency="CNY", completeness=1)
    with time_machine.travel(second.start + timedelta(days=3)):
        response = post(client, f"/api/v1/sharing-groups/{group['id']}/contracts/",
                        {"contract": vision.pk})
        assert response.status_code == 201, response.content
        [joined] = [m for m in response.json()["members"] if m["contract"] == vision.pk]
        assert joined["from"] == third.start.isoformat()  # the next period not begun
        again = post(client, f"/api/v1/sharing-groups/{group['id']}/contracts/",
                     {"contract": vision.pk})
        assert "in a sharing group already" in json.dumps(again.json())
    with time_machine.travel(third.start + timedelta(days=1)):
        client.force_login(operator)  # the session of a month before has expired
        left = client.delete(f"/api/v1/sharing-groups/{group['id']}/contracts/{vision.pk}/")
        assert left.status_code == 200, left.content
        [member] = [m for m in left.json()["members"] if m["contract"] == vision.pk]
        assert (member["from"], member["until"], member["removed_by"]) == (
            third.start.isoformat(), vision.periods()[3].start.isoformat(), "operator")


def test_a_lead_reads_its_own_group_but_never_writes_or_sees_another(
        client, lead, operator, pair, outsider):
    vision, speech = pair
    elsewhere = signed(Tenant.objects.create(slug="nlp", name="NLP"))
    client.force_login(operator)
    mine = post(client, "/api/v1/sharing-groups/",
                {"name": "org", "currency": "CNY", "contracts": [vision.pk, speech.pk]}).json()
    theirs = post(client, "/api/v1/sharing-groups/",
                  {"name": "other", "currency": "CNY", "contracts": [elsewhere.pk]}).json()
    client.force_login(lead)
    assert [g["name"] for g in client.get("/api/v1/sharing-groups/").json()] == ["org"]
    body = client.get(f"/api/v1/sharing-groups/{mine['id']}/").json()
    assert {m["tenant"] for m in body["members"]} == {"Vision Lab", "Speech"}
    assert "added_by" not in body["members"][0]  # who did what is the operators'
    assert client.get(f"/api/v1/sharing-groups/{theirs['id']}/").status_code == 404
    assert post(client, "/api/v1/sharing-groups/",
                {"name": "mine", "currency": "CNY"}).status_code == 403
    assert post(client, f"/api/v1/sharing-groups/{mine['id']}/contracts/",
                {"contract": elsewhere.pk}).status_code == 403
    # The partner's statements stay the partner's.
    assert client.get(f"/api/v1/contracts/{speech.pk}/statements").status_code == 404


@pytest.mark.django_db
def test_the_statements_api_shows_each_side_its_lines_and_the_saving(client, operator):
    vision, nlp = (Tenant.objects.create(slug=s, name=s.upper()) for s in ("vision", "nlp"))
    for tenant in (vision, nlp):
        attribute(tenant)
    borrower, lender = (signed(t, zone="UTC", committed="100") for t in (vision, nlp))
    Contract.objects.filter(pk__in=[borrower.pk, lender.pk]).update(starts_on=date(2026, 1, 1))
    client.force_login(operator)
    post(client, "/api/v1/sharing-groups/", {"name": "org", "currency": "CNY",
                                             "contracts": [borrower.pk, lender.pk]})
    meter("vision", JAN, 130)
    meter("nlp", JAN, 20, gpu_prefix="NLP")
    at = JAN.replace(month=2) + GRACE
    with time_machine.travel(at, tick=False):
        close_due_periods(at)
        body = client.get(f"/api/v1/contracts/{borrower.pk}/statements").json()
        credit = client.get(f"/api/v1/contracts/{lender.pk}/statements").json()
        group = client.get("/api/v1/sharing-groups/").json()[0]
        page = client.get(f"/en/tenants/vision/?contract={borrower.pk}").content.decode()
        table = client.get(f"/en/tenants/vision/periods.csv?contract={borrower.pk}")
    [first] = body["statements"]
    borrowed = [line for line in first["lines"] if line["kind"] == "borrowed"]
    assert borrowed == [{"kind": "borrowed", "gpu_hours": "30.000000", "rate": "10.0000",
                         "amount": "300.00", "group": "org",
                         "counterpart": {"contract": lender.pk, "tenant": "NLP"}}]
    # 30 GPU-h at 12 (the plan's 1.2 x 10) would have been 360: 60 saved.
    assert first["sharing"] == {"overage_without_sharing": "360.00", "shared_cost": "300.00",
                                "saving": "60.00"}
    assert first["total"] == "1300.00"
    # The page and the CSV say the same.
    assert "Borrowed from NLP (org), at its committed rate" in page
    assert 'data-amount="300.0000"' in page and 'data-saving="60.0000"' in page
    assert 'data-total="1300.0000"' in page and 'data-borrowed="30.000000"' in page
    # And the PDF the finance team files.
    with time_machine.travel(at, tick=False):
        printed = client.get(f"/api/v1/contracts/{borrower.pk}/statements?format=pdf&lang=en")
    text = subprocess.run(["pdftotext", "-layout", "-", "-"], input=printed.content,
                          capture_output=True, check=True).stdout.decode()
    assert "Borrowed from NLP (org), at its committed rate" in text
    assert "300.00 CNY" in text and "60.00 CNY" in text and "1,300.00 CNY" in text
    header, row = table.content.decode().splitlines()[:2]
    figures = dict(zip(header.split(","), row.split(","), strict=True))
    assert (figures["total_cost"], figures["borrowed_gpu_hours"], figures["sharing_cost"],
            figures["billed_so_far"]) == ("1300.00", "30.0", "300.00", "1300.00")
    [lent] = [line for line in credit["statements"][0]["lines"] if line["kind"] == "lent"]
    assert (lent["amount"], lent["counterpart"]["tenant"]) == ("-300.00", "VISION")
    assert group["statements"] == [{
        "period_start": JAN.isoformat(), "period_end": JAN.replace(month=2).isoformat(),
        "committed_cost": "2000.00", "overage_cost_after_sharing": "0.00",
        "provider_total": "2000.00", "saving": "360.00", "shared_gpu_hours": "30.000000",
        "currency": "CNY"}]


def admin_form(group=None, **fields) -> dict:
    data = {"name": group.name if group else "org", "currency": "CNY",
            "add_contract": "", "remove_contract": ""}
    for prefix in ("members", "statements"):
        data |= {f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0",
                 f"{prefix}-MIN_NUM_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"}
    return data | {k: str(v) for k, v in fields.items()}


def test_the_admin_adds_a_contract_and_shows_a_refusal_on_the_form(client, operator, pair,
                                                                   other_tenant):
    vision, speech = pair
    client.force_login(operator)
    created = client.post("/en/admin/loans/sharinggroup/add/", admin_form())
    assert created.status_code == 302, created.content.decode()[-3000:]
    group = SharingGroup.objects.get(name="org")
    url = f"/en/admin/loans/sharinggroup/{group.pk}/change/"
    assert client.post(url, admin_form(group, add_contract=vision.pk)).status_code == 302
    assert list(group.members.values_list("contract_id", flat=True)) == [vision.pk]
    utc = signed(Tenant.objects.create(slug="nlp", name="NLP"), zone="UTC")
    refused = client.post(url, admin_form(group, add_contract=utc.pk))
    assert refused.status_code == 200
    assert "do not begin and end with those of contract" in refused.content.decode()
    assert group.members.count() == 1
    page = client.get(url).content.decode()
    assert f"{vision}" in page  # the members over time


def test_the_lead_sees_the_groups_remaining_commitment_and_the_fleet_each_pool(
        client, lead, operator, contract, other_tenant):
    """This period: vision runs 8 GPUs for four days (far past its 1,000 GPU-h), speech
    one GPU for a day: the group covers part of vision's projected overage."""
    vision, speech = contract, signed(other_tenant, committed="2000")
    client.force_login(operator)
    post(client, "/api/v1/sharing-groups/", {"name": "org", "currency": "CNY",
                                             "contracts": [vision.pk, speech.pk]})
    attribute(vision.tenant)
    attribute(speech.tenant)
    period = vision.period_at(timezone.now())
    meter("vision", period.start, 96, gpus=8)
    meter("speech", period.start, 24, gpu_prefix="SP", on=node("gpu-node-02"))
    at = period.start + timedelta(days=4, hours=1)
    with time_machine.travel(at, tick=False):
        client.force_login(lead)
        page = client.get("/en/tenants/vision/").content.decode()
        client.force_login(operator)
        fleet = client.get("/en/fleet/").content.decode()
    assert "Sharing group org" in page
    # 768 of vision's 1,000 and 24 of speech's 2,000 are used.
    assert ("The group's 2 teams have 2,208.0 of 3,000.0 committed GPU-h left this period; "
            "this team's own: 232.0 GPU-h.") in page
    forecast = re.search(r'data-overage="([0-9.]+)" data-covered="([0-9.]+)"', page)
    overage, covered = (Decimal(x) for x in forecast.groups())
    assert 0 < covered < overage  # speech's projected unused hours cover part of it
    assert "the group is projected to cover" in page
    assert '<tr data-group="org">' in fleet
