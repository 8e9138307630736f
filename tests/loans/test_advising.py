"""The recommendation job on metered usage, and a lead's accept / dismiss."""

import pytest
from django.core.management import call_command

from loans.models import Recommendation
from loans.services.advice import refresh_recommendations
from loans.services.amendments import amend
from loans.tasks import recommend
from tests.story import NOW


def open_kinds() -> dict[str, Recommendation]:
    return {r.kind: r for r in Recommendation.objects.filter(state="open")}


def test_the_job_recommends_a_commitment_and_a_smaller_base_quota(contract, metered):
    run = refresh_recommendations(NOW)
    assert run.contracts == 1 and run.created == 2
    recs = open_kinds()
    commitment = recs["commitment"]
    # A month of history: one window, the month itself, is the whole distribution.
    assert commitment.lookback_days == 30 and commitment.confidence == "low"
    assert int(commitment.recommended) > 1000 and commitment.current == "1000"
    assert commitment.expected_saving > 0 and commitment.currency == "CNY"
    assert commitment.evidence["quantile"] == pytest.approx(1 / 6, abs=1e-4)
    # The story never holds more than 3 GPUs at once: a base quota of 8 sits mostly unused.
    assert (recs["base_quota"].current, recs["base_quota"].recommended) == ("8", "4")


def test_running_twice_keeps_one_open_recommendation_per_kind(contract, metered):
    refresh_recommendations(NOW)
    second = refresh_recommendations(NOW)
    assert second.created == 0 and second.updated == 2
    assert Recommendation.objects.count() == 2


def test_advice_no_longer_given_is_superseded(contract, metered):
    refresh_recommendations(NOW)
    advised = open_kinds()["commitment"].recommended
    amend(contract=contract, changes={"committed_gpu_hours": advised},
          from_period=contract.period_at(NOW).index, reason="took the advice", now=NOW)
    run = refresh_recommendations(NOW)
    assert run.superseded == 1
    assert Recommendation.objects.get(kind="commitment").state == "superseded"


def decide(client, user, rec, decision: str):
    client.force_login(user)
    return client.post(f"/en/tenants/vision/recommendations/{rec.pk}/{decision}/")


def test_a_lead_accepts_a_recommendation_for_an_operator_to_apply(client, lead, contract,
                                                                   metered):
    refresh_recommendations(NOW)
    rec = open_kinds()["commitment"]
    response = decide(client, lead, rec, "accept")
    assert response.status_code == 302
    rec.refresh_from_db()
    assert rec.state == "accepted" and rec.decided_by == lead
    page = client.get(response["Location"]).content.decode()
    assert "Accepted: an operator will apply it." in page
    assert "accepted, waiting for an operator" in page
    # A second click finds it decided; the job does not raise it again.
    decide(client, lead, rec, "dismiss")
    rec.refresh_from_db()
    assert rec.state == "accepted"
    refresh_recommendations(NOW)
    assert "commitment" not in open_kinds()


def test_a_dismissed_recommendation_is_not_raised_again(client, lead, contract, metered):
    refresh_recommendations(NOW)
    decide(client, lead, open_kinds()["base_quota"], "dismiss")
    assert refresh_recommendations(NOW).created == 0
    assert "base_quota" not in open_kinds()


@pytest.mark.parametrize(("actor", "status"), [("member", 403), ("outsider", 404),
                                               ("operator", 403)])
def test_only_the_tenant_s_leads_decide(client, contract, metered, actor, status, request):
    refresh_recommendations(NOW)
    rec = open_kinds()["commitment"]
    assert decide(client, request.getfixturevalue(actor), rec, "accept").status_code == status
    rec.refresh_from_db()
    assert rec.state == "open"


def test_deciding_is_a_post_with_a_known_decision(client, lead, contract, metered):
    refresh_recommendations(NOW)
    rec = open_kinds()["commitment"]
    client.force_login(lead)
    assert client.get(f"/en/tenants/vision/recommendations/{rec.pk}/accept/").status_code == 405
    url = f"/en/tenants/vision/recommendations/{rec.pk}/approve/"
    assert client.post(url).status_code == 404
    assert client.post("/en/tenants/vision/recommendations/999999/accept/").status_code == 404


def test_the_page_shows_the_cost_curve_with_the_chosen_point_and_buttons_for_leads(
        client, lead, member, contract, metered):
    refresh_recommendations(NOW)
    rec = open_kinds()["commitment"]
    client.force_login(lead)
    response = client.get("/en/tenants/vision/")
    shown = {r.kind: r for r in response.context["recommendations"]}
    figure = shown["commitment"].figure
    names = [t["name"] for t in figure["data"]]
    assert names[:3] == ["P10", "P10–P90", "Expected cost"]
    marked = next(t for t in figure["data"] if t["name"] == "Recommended")
    assert marked["x"] == [float(rec.recommended)]
    assert min(figure["data"][2]["y"]) == pytest.approx(marked["y"][0], rel=0.01)
    assert f"/recommendations/{rec.pk}/accept/" in response.content.decode()
    client.force_login(member)
    assert f"/recommendations/{rec.pk}/accept/" not in client.get(
        "/en/tenants/vision/").content.decode()


def test_the_job_and_the_command(contract, metered, capsys):
    assert recommend().startswith("2 created")
    call_command("recommend")
    assert "1 contracts: 0 recommendations created, 2 updated" in capsys.readouterr().out
