"""The ledger's rules, one example for each way statements went wrong before: late usage priced
with its own period's terms, corrections after the last period, ended and terminated
contracts, contracts compared by instants, terms fixed at signing, exact lines, rebuilds over
purged days, applied recommendations, and one reader for every figure."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, transaction

from loans.models import Amendment, Contract, Plan, Recommendation, Statement
from loans.services.ledger import read as ledgers
from loans.services.ledger.amendments import amend, apply_recommendation, terminate
from loans.services.ledger.closing import close_due_periods
from metering.models import TenantHour
from metering.recount import rebuild_rollups
from metering.retention import purge_raw_samples
from tests.ledger import (
    FEB,
    GRACE,
    JAN,
    MAR,
    attribute,
    long_retention,  # noqa: F401 (a fixture)
    meter,
)

D = Decimal
APR = datetime(2026, 4, 1, tzinfo=UTC)


pytestmark = pytest.mark.usefixtures("long_retention")


@pytest.fixture
def small_plan(db) -> Plan:
    """C = 100 GPU-h a month at 10.00, overage at 12.00."""
    return Plan.objects.create(
        name="Small", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=1, max_quota_gpus=2,
        committed_gpu_hours=D(100), committed_rate=D("10.00"), overage_rate=D("12.00"),
        term_months=3, currency="CNY")


def sign(tenant, plan, starts_on=date(2026, 1, 1), zone="UTC", **fields) -> Contract:
    contract = Contract(tenant=tenant, plan=plan, starts_on=starts_on, time_zone=zone,
                        status=Contract.Status.ACTIVE, **fields)
    contract.full_clean()
    contract.save()
    return contract


@pytest.fixture
def signed(tenant, small_plan) -> Contract:
    attribute(tenant)
    return sign(tenant, small_plan)


def close(moment: datetime) -> list[Statement]:
    with time_machine.travel(moment, tick=False):
        return close_due_periods(moment).written


def test_late_usage_of_a_period_over_its_commitment_costs_the_overage_rate(signed):
    meter("vision", JAN, 100)  # period 1 billed at its commitment: 1,000.00
    [first] = close(FEB + GRACE)
    assert first.total_cost == D("1000.00")
    meter("vision", JAN + timedelta(days=10), 10, gpu_prefix="LATE", at=FEB + GRACE)
    meter("vision", FEB, 50)  # period 2 stays under its commitment
    [second] = close(MAR + GRACE)
    [line] = second.corrections.all()
    assert (line.period_index, line.gpu_hours, line.amount) == (0, 10, D("120.00"))
    assert second.overage_cost == 0 and second.total_cost == D("1120.00")


def test_late_usage_that_kept_its_period_under_the_commitment_costs_nothing(signed):
    meter("vision", JAN, 80)
    close(FEB + GRACE)
    meter("vision", JAN + timedelta(days=10), 10, gpu_prefix="LATE", at=FEB + GRACE)
    meter("vision", FEB, 150)  # period 2 is over its own commitment by 50, not by 60
    [second] = close(MAR + GRACE)
    [line] = second.corrections.all()
    assert (line.gpu_hours, line.amount) == (10, 0)
    assert second.overage_gpu_hours == 50 and second.overage_cost == D("600.00")
    assert second.total_cost == D("1600.00")


def test_late_usage_after_the_last_period_goes_on_a_corrections_statement(signed):
    meter("vision", MAR, 130)
    written = close(APR + GRACE)
    assert [s.period_index for s in written] == [0, 1, 2]
    assert Contract.objects.get().status == Contract.Status.ENDED
    meter("vision", MAR + timedelta(days=3), 5, gpu_prefix="LATE", at=APR + GRACE)
    page = ledgers.read(Contract.objects.get(), APR + GRACE)
    assert [(e.period.index, c.amount) for e, c in page.pending] == [(2, D("60.00"))]
    [final] = close(APR + timedelta(days=10))  # stated in the month it is written: April
    assert final.kind == Statement.Kind.CORRECTIONS and final.total_cost == D("60.00")
    assert (final.period_index, final.period_start) == (3, APR)
    assert [(c.period_index, c.amount) for c in final.corrections.all()] == [(2, D("60.00"))]
    assert close(datetime(2026, 7, 1, tzinfo=UTC)) == []  # nothing is billed twice


def test_a_corrections_statement_is_labelled_with_the_month_it_is_written_in(signed):
    """The contract ended with March; usage of March reached the meter in May: its
    corrections statement is May's, not April's (the month after the term)."""
    meter("vision", MAR, 130)
    close(APR + GRACE)
    may = datetime(2026, 5, 1, tzinfo=UTC)
    meter("vision", MAR + timedelta(days=3), 5, gpu_prefix="LATE", at=may + timedelta(days=3))
    [final] = close(may + timedelta(days=4))
    assert final.kind == Statement.Kind.CORRECTIONS
    assert (final.period_start, final.period_end) == (may, datetime(2026, 6, 1, tzinfo=UTC))
    # One a month: what arrives later in May waits for June's.
    meter("vision", MAR + timedelta(days=5), 1, gpu_prefix="LATER", at=may + timedelta(days=9))
    assert close(may + timedelta(days=10)) == []
    [june] = close(datetime(2026, 6, 1, 1, tzinfo=UTC))
    assert june.period_start == datetime(2026, 6, 1, tzinfo=UTC)


def test_an_ended_contract_holds_its_instants_and_closes_nothing_past_its_end(signed,
                                                                             small_plan):
    with time_machine.travel(JAN + timedelta(days=5), tick=False):
        terminate(contract=signed, reason="moving to a bigger plan", now=JAN + timedelta(days=5))
    signed.refresh_from_db()
    assert (signed.term_months, signed.ends_on, signed.window_end) == (1, date(2026, 2, 1), FEB)
    renewal = sign(signed.tenant, small_plan, starts_on=date(2026, 2, 1))
    meter("vision", JAN, 744)
    meter("vision", FEB, 672)
    close(APR + GRACE)
    old = Statement.objects.filter(contract=signed)
    assert [s.period_index for s in old] == [0] and old[0].allocated_gpu_hours == 744
    assert Statement.objects.get(contract=renewal, period_index=0).allocated_gpu_hours == 672
    signed.refresh_from_db()
    assert signed.status == Contract.Status.ENDED
    # No contract of the tenant may overlap the ended one, whatever its status.
    clash = Contract(tenant=signed.tenant, plan=small_plan, starts_on=date(2026, 1, 15),
                     time_zone="UTC", status=Contract.Status.ACTIVE)
    with pytest.raises(ValidationError, match="already has a contract in force"):
        clash.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        clash.save()


def test_ending_a_contract_early_by_hand_is_refused_terminating_ends_it_at_the_period_end(
        signed):
    signed.status = Contract.Status.ENDED
    with time_machine.travel(JAN + timedelta(days=5)), pytest.raises(ValidationError,
                                                                    match="terminate it"):
        signed.full_clean()
    with pytest.raises(ValidationError, match="already ends at the end of its current period"):
        terminate(contract=signed, reason="r", now=MAR + timedelta(days=1))


def test_contracts_in_different_zones_are_compared_by_instants(tenant, small_plan):
    sign(tenant, small_plan, zone="UTC")  # until 2026-04-01 00:00 UTC
    # Starting on 2026-04-01 in Shanghai is 2026-03-31 16:00 UTC: eight hours would be billed
    # by both; refused though the dates do not overlap.
    clash = Contract(tenant=tenant, plan=small_plan, starts_on=date(2026, 4, 1),
                     time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    with pytest.raises(ValidationError, match="already has a contract in force"):
        clash.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        clash.save()
    after = sign(tenant, small_plan, starts_on=date(2026, 4, 2), zone="Asia/Shanghai")
    assert after.window_start == datetime(2026, 4, 1, 16, tzinfo=UTC)


def test_editing_a_plan_changes_no_signed_contract(signed, small_plan):
    small_plan.committed_rate, small_plan.overage_rate = D("20.00"), D("30.00")
    small_plan.term_months, small_plan.committed_gpu_hours = 12, D(500)
    small_plan.save()
    signed.refresh_from_db()
    assert len(signed.periods()) == 3
    assert signed.terms_for(0).committed_rate == D("10.00")
    meter("vision", JAN, 110)
    [first] = close(FEB + GRACE)
    assert (first.committed_gpu_hours, first.committed_rate, first.overage_rate) == (
        100, D("10.00"), D("12.00"))
    assert first.total_cost == D("1120.00")


def test_a_signed_contract_changes_only_by_an_amendment(signed):
    signed.committed_rate = D("9.00")
    with pytest.raises(ValidationError, match="only by an amendment"):
        signed.full_clean()
    with pytest.raises(ValidationError, match="only by an amendment"):
        signed.save()
    with pytest.raises(DatabaseError), transaction.atomic():
        Contract.objects.filter(pk=signed.pk).update(committed_rate=D("9.00"))


def test_a_stated_contract_keeps_its_start_zone_and_term(signed):
    meter("vision", JAN, 10)
    close(FEB + GRACE)
    signed.refresh_from_db()
    signed.starts_on = date(2026, 1, 10)  # would leave nine days no statement covers
    with pytest.raises(ValidationError, match="cannot change once it has a statement"):
        signed.full_clean()
    with pytest.raises(DatabaseError), transaction.atomic():
        Contract.objects.filter(pk=signed.pk).update(starts_on=date(2026, 1, 10))
    with pytest.raises(DatabaseError), transaction.atomic():
        Contract.objects.filter(pk=signed.pk).update(term_months=24)


def test_an_amendment_prices_the_periods_from_its_start_and_never_a_closed_one(signed):
    meter("vision", JAN, 120)
    with pytest.raises(ValidationError, match="period 2 to 3"):
        amend(contract=signed, changes={"overage_rate": "15"}, from_period=0, reason="r",
              now=JAN + timedelta(days=20))
    amendment = amend(contract=signed, changes={"committed_gpu_hours": "150",
                                                "overage_rate": "15"},
                      from_period=1, reason="renegotiated", now=JAN + timedelta(days=20))
    close(FEB + GRACE)
    assert amendment.changes == {"committed_gpu_hours": ["100.00", "150.00"],
                                 "overage_rate": ["12.0000", "15.0000"]}
    meter("vision", FEB, 160)
    meter("vision", JAN + timedelta(days=2), 5, gpu_prefix="LATE", at=MAR)
    [second] = close(MAR + GRACE)
    # Period 2 under the amended terms; period 1's late hours at period 1's rate.
    assert (second.committed_gpu_hours, second.overage_rate, second.overage_cost) == (
        150, D("15.0000"), D("150.00"))
    assert [(c.period_index, c.amount) for c in second.corrections.all()] == [(0, D("60.00"))]
    with pytest.raises(ValidationError, match="never rewritten"):
        amendment.save()


@pytest.mark.parametrize(("now", "from_period"), [
    (JAN + timedelta(days=19), 0),  # the current period: C 100 -> 200 on Jan 20
    (FEB - timedelta(hours=1), 0),  # an hour before the period's end
    (FEB + timedelta(hours=1), 0),  # ended, in its grace, not yet stated
    (FEB + timedelta(hours=1), 1),  # the period that began an hour ago
])
def test_no_amendment_reprices_a_period_that_has_begun(signed, now, from_period):
    meter("vision", JAN, 300)
    with pytest.raises(ValidationError, match="has not begun"):
        amend(contract=signed, changes={"committed_gpu_hours": "200"},
              from_period=from_period, reason="late", now=now)
    [january] = close(FEB + GRACE)
    assert (january.committed_gpu_hours, january.total_cost) == (100, D("3400.00"))


def test_the_rate_printed_on_a_statement_is_the_rate_charged(tenant, db):
    attribute(tenant)
    plan = Plan.objects.create(name="Odd", base_quota_gpus=1, max_quota_gpus=2,
                               committed_gpu_hours=D(0), committed_rate=D("2.3457"),
                               overage_multiplier=D("1.2"), term_months=1, currency="CNY")
    sign(tenant, plan)
    meter("vision", JAN, 333)
    [statement] = close(FEB + GRACE)
    assert statement.overage_rate == D("2.8148")
    assert statement.overage_cost == (statement.overage_gpu_hours * D("2.8148")).quantize(
        D("0.01")) == D("937.33")


def test_a_rebuild_over_purged_days_keeps_their_rollups_and_bills_nothing_back(signed,
                                                                              settings):
    meter("vision", JAN, 200)
    close(FEB + GRACE)
    before = list(TenantHour.objects.order_by("hour").values_list("hour", "allocated_gpu_s"))
    settings.RAW_RETENTION_DAYS = 35
    purge_raw_samples(MAR + timedelta(days=10))
    recount = rebuild_rollups(JAN, MAR)
    assert recount.kept is not None and recount.kept[0] == JAN
    assert list(TenantHour.objects.order_by("hour").values_list(
        "hour", "allocated_gpu_s")) == before
    assert ledgers.read(Contract.objects.get(), MAR + timedelta(days=10)).pending == []


def test_applying_an_accepted_recommendation_amends_from_the_next_period(
        client, signed, lead, operator):
    rec = Recommendation.objects.create(
        contract=signed, kind="commitment", current="100", recommended="140", message="m",
        created_at=JAN + timedelta(days=3), state="accepted", decided_by=lead,
        decided_at=JAN + timedelta(days=3))
    now = JAN + timedelta(days=4)
    with time_machine.travel(now, tick=False):
        apply_recommendation(recommendation=rec, author=operator, now=now)
        rec.refresh_from_db()
        assert rec.state == "applied" and rec.applied_by == operator
        assert (rec.amendment.from_period, rec.amendment.changes) == (
            1, {"committed_gpu_hours": ["100.00", "140.00"]})
        assert signed.terms_for(0).committed_gpu_hours == 100
        assert signed.terms_for(1).committed_gpu_hours == 140
        client.force_login(lead)
        page = client.get("/en/tenants/vision/").content.decode()
    assert f"applied from period 2 by {operator.username}" in page


def test_a_dismissed_recommendation_stays_visible_as_dismissed(client, signed, lead):
    now = JAN + timedelta(days=4)
    Recommendation.objects.create(
        contract=signed, kind="base_quota", current="1", recommended="2", message="quota",
        created_at=now, state="dismissed", decided_by=lead, decided_at=now)
    with time_machine.travel(now, tick=False):
        client.force_login(lead)
        page = client.get("/en/tenants/vision/").content.decode()
    assert f"dismissed by {lead.username}" in page


def test_every_reader_shows_the_cost_the_ledger_computes(client, signed, operator):
    """The tenant page, the burn-down API, the fleet, the admin list and the statements API
    read one service, amended terms included."""
    now = FEB + timedelta(days=10)
    meter("vision", JAN, 130)
    meter("vision", FEB, 120, at=now)
    amend(contract=signed, changes={"committed_gpu_hours": "60"}, from_period=1, reason="r",
          now=JAN + timedelta(days=20))
    with time_machine.travel(now, tick=False):
        close_due_periods(now)
        want = ledgers.read(signed, now).current.cost
        assert want.committed_cost == D("600.00") and want.overage_cost == D("720.00")
        client.force_login(operator)
        page = client.get("/en/tenants/vision/").context["figures"]
        api = client.get(f"/api/v1/contracts/{signed.pk}/burndown").json()
        fleet = client.get("/en/fleet/").context["page"].object_list[0].figures
        admin = client.get("/en/admin/loans/contract/").content.decode()
        statements = client.get(f"/api/v1/contracts/{signed.pk}/statements").json()
    assert page.cost_so_far == want == fleet.cost_so_far
    assert api["cost_so_far"]["total"] == str(want.total)
    assert f"{want.total:,.2f} CNY" in admin
    assert statements["statements"][0]["total"] == "1360.00"


def test_amendments_show_on_the_tenant_page_with_who_and_why(client, signed, lead, operator):
    amend(contract=signed, changes={"max_quota_gpus": 2, "base_quota_gpus": 2},
          from_period=1, reason="more GPUs for the spring launch", author=operator,
          now=JAN + timedelta(days=2))
    with time_machine.travel(JAN + timedelta(days=3), tick=False):
        client.force_login(lead)
        response = client.get("/en/tenants/vision/")
    [shown] = response.context["amendments"]
    assert shown == Amendment.objects.get()
    page = response.content.decode()
    assert "more GPUs for the spring launch" in page and "base quota (GPUs) 1 → 2" in page
