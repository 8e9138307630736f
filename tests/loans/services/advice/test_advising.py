"""The recommendation job on metered usage, and a lead's accept / dismiss."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command

from loans.models import Contract, Plan, Recommendation, SharingGroup
from loans.services.advice import plans
from loans.services.advice import pooled as pooled_advice
from loans.services.advice.standalone import (
    History,
    period_hours_of,
    plan_draft,
    refresh_recommendations,
    same_advice,
)
from loans.services.ledger import sharing
from loans.services.ledger.amendments import amend
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
    # Signed from period 3, held for the 10 periods left in the term: the term model prices it.
    assert commitment.evidence["term"]["periods"] == 10
    assert not commitment.evidence["term"]["renewal"]
    assert commitment.message.startswith("For the 10 periods left in the term, commit ")
    # The term's total for the advised, the current and the rule-of-thumb commitment.
    totals = commitment.evidence["term"]["totals"]
    assert set(totals) == {"recommended", "current", "rule_of_thumb"}
    assert all(p10 <= p50 <= p90 for p10, p50, p90 in totals.values())
    assert totals["current"][0] >= 1000 * 10 * 10  # ten periods of 1,000 GPU-h at 10
    # The story never holds more than 3 GPUs at once: a base quota of 8 sits mostly unused,
    # and 3 leaves no hour needing a burst.
    base = recs["base_quota"]
    assert (base.current, base.recommended) == ("8", "3")
    assert base.evidence["burst_share_advised"] == 0 and base.evidence["periods_ahead"] == 10
    assert base.message.startswith("Lower the base quota to 3 GPUs (now 8): with the last 30 "
                                   "days' use grown as forecast over the 10 periods ahead")


def test_running_twice_keeps_one_open_recommendation_per_kind(contract, metered):
    refresh_recommendations(NOW)
    second = refresh_recommendations(NOW)
    assert second.created == 0 and second.updated == 2
    assert Recommendation.objects.count() == 2


def test_advice_no_longer_given_is_superseded(contract, metered):
    refresh_recommendations(NOW)
    advised = open_kinds()["commitment"].recommended
    amend(contract=contract, changes={"committed_gpu_hours": advised},
          from_period=contract.period_at(NOW).index + 1, reason="took the advice", now=NOW)
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


def test_a_dismissed_value_does_not_return_one_gpu_hour_away_but_a_real_move_does(
        client, lead, contract, metered, settings):
    """Dismissed advice came back at once with a value one GPU-h away."""
    refresh_recommendations(NOW)
    rec = open_kinds()["commitment"]
    decide(client, lead, rec, "dismiss")
    advised = int(rec.recommended)
    Recommendation.objects.filter(pk=rec.pk).update(recommended=str(advised - 1))
    assert refresh_recommendations(NOW).created == 0
    Recommendation.objects.filter(pk=rec.pk).update(recommended=str(int(advised / 1.2)))
    assert refresh_recommendations(NOW).created == 1  # moved by more than 10%
    assert open_kinds()["commitment"].recommended == str(advised)


def test_same_advice_is_equal_or_within_the_move_share(settings):
    settings.ADVICE_MOVE_PERCENT = 10
    assert same_advice("1000", "1100") and same_advice("1000", "900")
    assert not same_advice("1000", "1101") and not same_advice("0", "1")
    assert same_advice("Plan A", "Plan A") and not same_advice("Plan A", "Plan B")
    assert not same_advice("NaN", "NaN1") and not same_advice("Infinity", "1")


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
    assert names[:3] == ["P10", "P10–P90 of the cost", "Expected cost"]
    marked = next(t for t in figure["data"] if t["name"] == "Recommended")
    assert marked["x"] == [float(rec.recommended)]
    assert min(figure["data"][2]["y"]) == pytest.approx(marked["y"][0], rel=0.01)
    assert f"/recommendations/{rec.pk}/accept/" in response.content.decode()
    rows = {t["label"]: t for t in shown["commitment"].totals}
    assert list(rows) == ["advised", "current", "Rule of thumb"]
    assert str(rows["advised"]["p50"]) == str(rec.evidence["term"]["totals"]["recommended"][1])
    assert f'{rows["advised"]["commitment"]:f}' == rec.recommended  # 5032, not 5032.0
    assert "Total cost over the 10 periods, CNY" in response.content.decode()
    client.force_login(member)
    assert f"/recommendations/{rec.pk}/accept/" not in client.get(
        "/en/tenants/vision/").content.decode()


def test_the_job_and_the_command(contract, metered, capsys):
    assert recommend().startswith("2 created")
    call_command("recommend")
    assert "1 contracts: 0 recommendations created, 2 updated" in capsys.readouterr().out


def test_the_same_usage_gets_the_same_commitment_in_february_and_march(contract, monkeypatch):
    """Advice was read on the current period's hours: February's (672 h) came out 9.7% below
    March's (744 h) for the same flat usage."""
    from datetime import UTC, datetime

    from loans.services.advice import standalone as advice

    seen = []
    monkeypatch.setattr(advice, "commitment_draft",
                        lambda contract, past, period_hours, now, term: seen.append(period_hours))
    monkeypatch.setattr(advice, "plan_draft", lambda *args: None)
    for now in (datetime(2027, 2, 15, tzinfo=UTC), datetime(2027, 3, 15, tzinfo=UTC)):
        advice.drafts_for(contract, now)
    assert seen == [730, 730]  # a year of 8,760 hours in twelve periods


def offered(name: str, *, base: int, fee: str, term: int, committed: int = 3000,
            rate: int = 8, guarantee: str = "100", credits: str = "") -> Plan:
    plan = Plan(name=name, gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=base,
                max_quota_gpus=16, committed_gpu_hours=Decimal(committed),
                committed_rate=Decimal(rate), upfront_fee=Decimal(fee), term_months=term,
                currency="CNY", guarantee_pct=Decimal(guarantee), credit_tiers=credits)
    plan.full_clean()
    plan.save()
    return plan


def flat(gpus: float) -> History:
    hours = 3 * 730
    return History(allocated=[gpus] * hours, busy=[gpus / 2] * hours, peaks=[gpus] * hours)


def test_a_plan_switch_counts_upfront_fees_and_never_drops_the_guarantee_used(contract):
    """It advised, mid-term, a plan with a 1,000,000 upfront fee and a 36-month term, and one
    with base quota 0 for a team that used its GPUs, "to save 2,896 a period"."""
    past = flat(4.0)
    # Under the contract: 10,000 + 1,920 x 12 = 33,040 a period, 330,400 over the 10 left.
    offered("Fee heavy", base=8, fee="1000000", term=36)  # 240,000 + 10/36 of the fee
    offered("No guarantee", base=0, fee="0", term=12)  # 4 GPUs are used at once
    assert plan_draft(contract, past, 730, NOW) is None
    offered("Fair", base=4, fee="36000", term=12)
    draft = plan_draft(contract, past, 730, NOW)
    assert draft.recommended == "Fair"
    # 3,000 GPU-h at 8 for 10 periods, and 10/12 of the fee: 270,000 against 330,400.
    assert draft.expected_saving == (Decimal("330400") - Decimal("270000")) / 10
    assert draft.wording.english.startswith(
        "Over the 10 periods left in the term, Fair is expected to cost 270,000.00 CNY, "
        "30,000.00 of its upfront fee and the 0.00 still owed")
    fits = {p["plan"]: (p["fits_peak"], p["guarantees_base"]) for p in draft.evidence["plans"]}
    assert fits["No guarantee"] == (True, False) and draft.evidence["base_quota_needed"] == 4


def test_a_plan_that_guarantees_less_often_is_no_advice(contract):
    """The contract guarantees its base quota 100% of the time; a cheaper plan that
    guarantees it 90% of the time is not the advice, whatever it saves."""
    offered("Less often", base=4, fee="0", term=12, guarantee="90")
    draft_none = plan_draft(contract, flat(4.0), 730, NOW)
    assert draft_none is None


def test_service_credits_at_the_measured_availability_lower_a_plans_expected_cost(
        contract, monkeypatch):
    """The team's statements measured 92% and 94%: "Credited" (below 95%: 20% of its
    committed 24,000.00 a period) would have credited 4,800.00 a period, 48,000.00 over the
    ten left, against "Fair" without credits: 192,000.00 against 240,000.00 (3,000 GPU-h at 8
    for ten periods, no fee)."""
    monkeypatch.setattr(plans, "measured_availability",
                        lambda _c: [Decimal("0.92"), Decimal("0.94")])
    offered("Fair", base=4, fee="0", term=12)
    offered("Credited", base=4, fee="0", term=12, credits="95:20")
    draft = plan_draft(contract, flat(4.0), 730, NOW)
    assert draft.recommended == "Credited"
    by_name = {p["plan"]: p for p in draft.evidence["plans"]}
    assert (by_name["Credited"]["expected_credits"], by_name["Credited"]["cost"]) == (
        "-48000.00", "192000.00")
    assert (by_name["Fair"]["expected_credits"], by_name["Fair"]["cost"]) == ("0", "240000.00")


def test_the_page_compares_the_plans_as_they_were_priced(client, lead, contract):
    from loans.services.advice.standalone import refresh_contract

    offered("No guarantee", base=0, fee="0", term=12)
    offered("Fair", base=4, fee="36000", term=12)
    refresh_contract(contract, [plan_draft(contract, flat(4.0), 730, NOW)], NOW)
    client.force_login(lead)
    response = client.get("/en/tenants/vision/")
    (shown,) = [r for r in response.context["recommendations"] if r.kind == "plan"]
    rows = {row["plan"]: row for row in shown.plans}
    assert list(rows) == ["H100 Guaranteed 8", "No guarantee", "Fair"]  # current, then by cost
    assert rows["H100 Guaranteed 8"]["cost"] == Decimal("330400.00")
    assert (rows["Fair"]["cost"], rows["Fair"]["fee"], rows["Fair"]["owed"]) == (
        Decimal("270000.00"), Decimal("30000.00"), Decimal("0"))
    assert rows["Fair"]["advised"] and not rows["No guarantee"]["guarantees"]
    # The contract's own terms are judged alike: a cap of 16 and 8 guaranteed, 4 needed.
    assert rows["H100 Guaranteed 8"]["fits"] is True
    assert rows["H100 Guaranteed 8"]["guarantees"] is True
    page = response.content.decode()
    assert "Expected cost over the 10 periods, CNY" in page and "Fair (advised)" in page


def test_the_comparison_says_when_the_current_terms_guarantee_too_little(client, lead,
                                                                         contract):
    from loans.services.advice.standalone import refresh_contract

    offered("Big", base=10, fee="0", term=12, committed=7000)
    refresh_contract(contract, [plan_draft(contract, flat(10.0), 730, NOW)], NOW)
    client.force_login(lead)
    (shown,) = [r for r in client.get("/en/tenants/vision/").context["recommendations"]
                if r.kind == "plan"]
    current = shown.plans[0]
    assert current["plan"] == "H100 Guaranteed 8" and current["fits"] is True
    assert current["guarantees"] is False  # 10 GPUs at once against 8 guaranteed


def test_a_smaller_plan_waits_for_renewal_while_the_signed_commitment_is_still_owed(
        contract):
    """1 GPU used against 1,000 GPU-h committed at 10: 10,000 a period. A plan committing 500
    at 10 would bill 5,000 + 230 x 12 = 7,760, but mid-term the 5,000 a period still owed on
    the signed commitment makes it 12,760: no advice until the term ends."""
    past = flat(1.0)
    offered("Smaller", base=1, fee="0", term=12, committed=500, rate=10)
    assert plan_draft(contract, past, 730, NOW) is None
    renewal = contract.periods()[-1].start + timedelta(days=3)
    draft = plan_draft(contract, past, 730, renewal)
    assert draft.recommended == "Smaller" and draft.evidence["renewal"]
    assert draft.evidence["periods"] == 12
    assert draft.expected_saving == Decimal("10000") - Decimal("7760")
    assert draft.wording.english.startswith("For the next term (12 periods), Smaller is "
                                            "expected to cost 93,120.00 CNY")
    owed = {p["plan"]: p["still_owed"] for p in draft.evidence["plans"]}
    assert owed == {"Smaller": "0"}


def test_bursts_that_waited_or_were_refused_are_the_pressure_the_scale_rule_reads(
        contract, lead):
    from datetime import timedelta

    from loans.models import BurstRequest
    from loans.services.advice.standalone import pressed_bursts

    def burst(gpus, state, waited):
        return BurstRequest.objects.create(
            contract=contract, gpus=gpus, starts_at=NOW, ends_at=NOW + timedelta(hours=4),
            reason="x", requested_by=lead, created_at=NOW - timedelta(days=2), state=state,
            decided_at=NOW - timedelta(days=2) + waited)

    burst(2, "granted", timedelta(seconds=1))  # the pool had room: no pressure
    burst(3, "rejected", timedelta(0))
    burst(5, "granted", timedelta(hours=3))  # waited for GPUs to come free
    assert pressed_bursts(contract, NOW) == (2, 5)


def test_a_commitment_changed_now_is_held_for_the_rest_of_the_term_or_the_next(contract):
    from datetime import timedelta

    from loans.services.advice.standalone import periods_ahead

    assert periods_ahead(contract, NOW) == (10, False)  # period 2 of 12; from period 3 on
    last = contract.periods()[-1]
    assert periods_ahead(contract, last.start + timedelta(days=3)) == (12, True)


def test_in_a_sharing_group_the_commitments_are_advised_together_under_the_sharing_rule(
        contract, metered, other_tenant):
    """vision (1,000 GPU-h, uses 1,400) shares with speech, which commits 1,000 GPU-h and uses
    none, at the same rates: the group's advice (loans.maths.pooling, under the rule the close
    uses) trims the waste where it is. speech is advised down to what vision borrows; vision,
    which runs over its commitment, is not told to commit nothing and borrow. The words carry
    the figures, and no figure is called a part of a saving it exceeds."""
    speech = Contract(tenant=other_tenant, plan=contract.plan, starts_on=contract.starts_on,
                      time_zone=contract.time_zone, status=Contract.Status.ACTIVE)
    speech.full_clean()
    speech.save()
    group = SharingGroup.objects.create(name="org", currency="CNY")
    for member in (contract, speech):
        sharing.join(group, member, by=None, now=NOW - timedelta(days=60))
    refresh_recommendations(NOW)
    found = pooled_advice.group_advice(contract, NOW, period_hours_of(contract))
    assert found.advised == {contract.pk: 1000.0, speech.pk: 400.0}
    assert not Recommendation.objects.filter(contract=contract, kind="commitment",
                                             state="open").exists()
    pooled = Recommendation.objects.get(contract=speech, kind="commitment", state="open")
    evidence = pooled.evidence["pooled"]
    assert evidence["group"] == "org" and evidence["partners_commit"] == 1000
    assert Decimal(pooled.recommended) == Decimal(400)
    costs = evidence["group_costs"]
    assert Decimal(costs["current"]) == Decimal("20000.00")  # 2,000 GPU-h at 10
    assert Decimal(costs["recommended"]) == Decimal("14000.00")  # 1,400 GPU-h at 10
    assert pooled.expected_saving == Decimal(costs["current"]) - Decimal(costs["recommended"])
    assert Decimal(costs["recommended"]) <= Decimal(costs["standalone"])
    assert pooled.message.startswith(f"Sharing in org, commit {int(pooled.recommended):,} GPU-h")
    assert f"falls by {pooled.expected_saving:,.2f} CNY" in pooled.message
    assert "comes from pooling" not in pooled.message
