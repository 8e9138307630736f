"""Who sees which page and API figure; where each actor lands; the fleet page's figures and
sorting; log in, log out and change a password."""

import csv
import io
import json
import re
from datetime import date, timedelta

import pytest

from loans.models import Contract, Membership, Tenant
from metering.models import Gpu, Node
from tests.conftest import PASSWORD, make_user
from tests.story import NOW

ANONYMOUS = None


@pytest.fixture
def actors(lead, member, outsider, operator):
    return {"anonymous": ANONYMOUS, "lead": lead, "member": member, "outsider": outsider,
            "operator": operator}


PAGES = [  # url, then what anonymous, lead, member, outsider (of another tenant), operator get
    ("/en/tenants/vision/", "login", 200, 200, 404, 200),
    ("/en/tenants/vision/?period=1", "login", 200, 200, 404, 200),
    ("/en/tenants/vision/periods.csv", "login", 200, 200, 404, 200),
    ("/en/fleet/", "login", 403, 403, 403, 200),
    ("/en/fleet.csv", "login", 403, 403, 403, 200),
    ("/api/v1/contracts/{contract}/burndown", 401, 200, 200, 404, 200),
    ("/api/v1/contracts/{contract}/heatmap", 401, 200, 200, 404, 200),
    ("/api/v1/tenants/vision/usage", 401, 200, 200, 404, 200),
]


@pytest.mark.parametrize("row", PAGES, ids=[row[0] for row in PAGES])
def test_every_page_and_api_figure_answers_each_actor_as_it_should(client, actors, contract,
                                                                   metered, row):
    url, *answers = row
    url = url.format(contract=contract.pk)
    for (name, user), want in zip(actors.items(), answers, strict=True):
        client.logout()
        if user is not None:
            client.force_login(user)
        response = client.get(url)
        if want == "login":
            assert response.status_code == 302, name
            assert response["Location"].startswith("/en/accounts/login/?next="), name
        else:
            assert response.status_code == want, (name, url, response.status_code)


def test_a_contract_id_of_another_tenant_is_unknown_to_a_lead(client, lead, other_tenant, plan,
                                                             frozen):
    theirs = Contract.objects.create(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                                     status=Contract.Status.ACTIVE)
    client.force_login(lead)
    assert client.get(f"/api/v1/contracts/{theirs.pk}/burndown").status_code == 404
    assert client.get(f"/en/tenants/vision/?contract={theirs.pk}").status_code == 404


def test_an_operator_lands_on_the_fleet_and_a_lead_on_their_tenant(client, lead, operator):
    client.force_login(operator)
    assert client.get("/en/")["Location"] == "/en/fleet/"
    client.force_login(lead)
    assert client.get("/en/")["Location"] == "/en/tenants/vision/"


def test_a_member_of_two_tenants_chooses_and_one_of_none_is_told_why(client, lead, other_tenant):
    Membership.objects.create(user=lead, tenant=other_tenant)
    client.force_login(lead)
    html = client.get("/en/").content.decode()
    assert "/en/tenants/vision/" in html and "/en/tenants/speech/" in html
    client.force_login(make_user("newcomer"))
    assert "not a member of any tenant yet" in client.get("/en/").content.decode()


def test_a_lead_logs_in_changes_the_password_and_logs_out(client, lead):
    response = client.post("/en/accounts/login/?next=/en/tenants/vision/",
                           {"username": "lead", "password": PASSWORD,
                            "next": "/en/tenants/vision/"})
    assert response["Location"] == "/en/tenants/vision/"
    response = client.post("/en/accounts/password/", {
        "old_password": PASSWORD, "new_password1": "another-long-pass-42",
        "new_password2": "another-long-pass-42"})
    assert response["Location"] == "/en/accounts/password/done/"
    assert client.post("/en/accounts/logout/")["Location"] == "/en/accounts/login/"
    assert client.get("/en/tenants/vision/").status_code == 302
    response = client.post("/en/accounts/login/", {"username": "lead",
                                                   "password": "another-long-pass-42"})
    assert response.status_code == 302


def test_a_wrong_password_is_refused_with_a_message(client, lead):
    response = client.post("/en/accounts/login/", {"username": "lead", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


def _fleet_tenants(client, query: str = "") -> list[str]:
    response = client.get(f"/en/fleet/{query}")
    return [s.contract.tenant.slug for s in response.context["page"].object_list]


@pytest.fixture
def second_contract(other_tenant, plan, frozen):
    contract = Contract(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                        time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


def test_the_fleet_table_sorts_by_each_column(client, operator, contract, second_contract,
                                              metered):
    client.force_login(operator)
    # vision has used GPU-hours, speech none.
    assert _fleet_tenants(client, "?sort=used&dir=desc") == ["vision", "speech"]
    assert _fleet_tenants(client, "?sort=used&dir=asc") == ["speech", "vision"]
    assert _fleet_tenants(client, "?sort=tenant&dir=asc") == ["speech", "vision"]
    # speech wastes its whole commitment (10,000 CNY), more than vision's projected overage:
    # money at stake counts either side.
    assert _fleet_tenants(client, "?sort=money&dir=desc") == ["speech", "vision"]
    assert _fleet_tenants(client, "?sort=money&dir=asc") == ["vision", "speech"]
    assert _fleet_tenants(client, "?sort=nonsense") == ["vision", "speech"]  # default: projected


def test_a_big_fleet_is_shown_a_hundred_contracts_a_page_in_the_order_asked(
        client, operator, plan, frozen):
    tenants = Tenant.objects.bulk_create(
        Tenant(slug=f"team-{k:03d}", name=f"Team {k:03d}") for k in range(130))
    for tenant in tenants:
        Contract(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1), time_zone="UTC",
                 status=Contract.Status.ACTIVE).save()
    client.force_login(operator)
    first = _fleet_tenants(client, "?sort=tenant&dir=asc")
    assert first == [f"team-{k:03d}" for k in range(100)]
    second = client.get("/en/fleet/?sort=tenant&dir=asc&page=2")
    assert [s.contract.tenant.slug for s in second.context["page"].object_list] == [
        f"team-{k:03d}" for k in range(100, 130)]
    html = second.content.decode()
    assert "101–130 of 130" in html and "Page 2 of 2" in html
    assert 'href="?sort=tenant&amp;dir=asc&amp;page=1" rel="prev"' in html
    # A page that is not one is answered with the nearest that is, never an error.
    for page in ("0", "9", "x", "-1", "1e9"):
        response = client.get(f"/en/fleet/?page={page}")
        assert response.status_code == 200
        assert len(response.context["page"].object_list) in (100, 30)
    # The export has every contract, not a page of them.
    rows = list(csv.reader(io.StringIO(client.get("/en/fleet.csv").content.decode())))
    assert len(rows) == 1 + 130


def test_the_fleet_shows_money_at_stake_capacity_nodes_and_unattributed(
        client, operator, contract, second_contract, metered):
    client.force_login(operator)
    response = client.get("/en/fleet/")
    speech = next(s for s in response.context["page"].object_list if s.contract == second_contract)
    assert speech.projected_waste == 10_000  # 1,000 GPU-h at 10.00, none used
    assert speech.projected_overage_cost == 0
    by_model, whole = response.context["capacity"], response.context["whole"]
    assert [(c.model, c.physical_gpus, c.guaranteed_gpus) for c in by_model] == [
        ("NVIDIA H100 80GB HBM3", 3, 16)]
    assert whole.over_commitment == pytest.approx(16 / 3)
    node = response.context["nodes"][0]
    assert node.name == "gpu-node-01" and node.gpus == 3
    assert node.completeness == pytest.approx(1.0)
    assert response.context["unattributed"] == (0.0, 0.0)


def test_node_completeness_counts_the_gaps(client, operator, frozen):
    node = Node.objects.create(name="gappy")
    token = node.issue_token()
    # One GPU, seen for days, reports 18 of the last 24 hours.
    hours = [NOW - timedelta(hours=k) for k in range(1, 25) if k not in (3, 4, 10, 11, 12, 20)]
    body = {"node": "gappy", "samples": [
        {"gpu_uuid": "GPU-gappy", "ts": hour.isoformat(), "interval_s": 3600, "allocated": False}
        for hour in hours]}
    client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {token}")
    Gpu.objects.update(first_seen_at=NOW - timedelta(days=3))
    client.force_login(operator)
    status = client.get("/en/fleet/").context["nodes"][0]
    assert status.name == "gappy" and status.completeness == pytest.approx(18 / 24)
    assert status.measured_from is None  # seen for days: the whole 24 h is measured


def report_one_minute(client) -> None:
    """A new node, "new-node", reports one minute of one idle GPU, a minute before NOW."""
    node = Node.objects.create(name="new-node")
    body = {"node": "new-node", "samples": [
        {"gpu_uuid": "GPU-new", "ts": (NOW - timedelta(minutes=1)).isoformat(),
         "interval_s": 60, "allocated": False}]}
    client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {node.issue_token()}")


def test_a_node_that_reported_for_a_minute_says_what_its_completeness_covers(
        client, operator, frozen):
    """It showed "Completeness, 24 h 100.0%" after one minute of reports."""
    report_one_minute(client)
    client.force_login(operator)
    page = client.get("/en/fleet/")
    [status] = page.context["nodes"]
    assert status.measured_from is not None and status.measured_from > NOW - timedelta(hours=1)
    assert "since its first report, " in page.content.decode()


def test_the_fleet_exports_as_csv(client, operator, contract, second_contract, metered):
    client.force_login(operator)
    response = client.get("/en/fleet.csv?sort=tenant&dir=asc")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["tenant"] for r in rows] == ["speech", "vision"]
    assert rows[0]["projected_waste"] == "10000.00"
    # The page's precisions, one a column: GPU-hours and days to 0.1, money to the
    # currency's minor unit (six places of GPU-hours were the meter's, not the page's).
    for row in rows:
        for name in ("committed_gpu_hours", "used_gpu_hours", "projected_gpu_hours",
                     "days_left"):
            assert re.fullmatch(r"\d+\.\d", row[name]), (name, row[name])
        for name in ("projected_overage_cost", "projected_waste"):
            assert re.fullmatch(r"\d+\.\d{2}", row[name]), (name, row[name])
    assert rows[0]["committed_gpu_hours"] == "1000.0"


def test_an_empty_fleet_says_what_to_do(client, operator):
    client.force_login(operator)
    html = client.get("/en/fleet/").content.decode()
    assert "No active contract is in a period now" in html
    assert "No node yet" in html


def test_the_fleet_leaks_no_node_or_tenant_to_a_lead(client, lead):
    Node.objects.create(name="secret-node")
    Tenant.objects.create(slug="hidden", name="Hidden Team")
    client.force_login(lead)
    response = client.get("/en/fleet/")
    assert response.status_code == 403
    assert "secret-node" not in response.content.decode()
    assert "Hidden Team" not in client.get("/en/tenants/vision/").content.decode()


def test_chinese_pages_say_terms_figures_and_generated_reasons_in_chinese(client, lead,
                                                                           operator, contract):
    """The lead's page said "最高配额 16 GPU 数" and "4,000 每账期承诺 GPU 小时", headings with
    ASCII colons, amendment figures as "4000.00 → 5000.00", and an applied recommendation's
    reason in the English it was written in."""
    from loans.models import Recommendation
    from loans.services.ledger.amendments import apply_recommendation

    rec = Recommendation.objects.create(
        contract=contract, kind="commitment", current="1000", recommended="4000", message="m",
        created_at=NOW, state="accepted", decided_by=lead, confidence="low")
    apply_recommendation(recommendation=rec, author=operator, now=NOW)
    Recommendation.objects.create(contract=contract, kind="commitment", current="4000",
                                  recommended="5000", message="m", created_at=NOW,
                                  confidence="low")
    client.force_login(lead)
    page = client.get("/zh-hans/tenants/vision/").content.decode()
    assert "保底配额 8 · 最高配额 16 块 GPU" in page
    assert "每账期承诺 1,000 GPU 小时" in page
    assert "承诺量：4,000 → 5,000" in page and "置信度：低" in page
    assert "1,000.00 → 4,000.00" in page  # the amendment's figures, with separators
    assert f"建议 {rec.pk} 已由 lead 接受：" in page
    assert "accepted by" not in page
