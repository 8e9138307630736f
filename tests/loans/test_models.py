from datetime import date
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, transaction

from loans.models import Contract, Plan, Statement

D = Decimal
VALID_PLAN = dict(
    name="P", base_quota_gpus=8, max_quota_gpus=16, committed_gpu_hours=D("1000"),
    committed_rate=D("10"), term_months=12, currency="CNY",
)

IMPOSSIBLE_PLANS = [
    ({"max_quota_gpus": 4}, "The max quota cannot be below the base quota."),
    ({"base_quota_gpus": 0, "max_quota_gpus": 0}, "The max quota must allow at least one GPU."),
    ({"committed_rate": D("-1")}, "greater than or equal to 0"),
    ({"upfront_fee": D("-5")}, "greater than or equal to 0"),
    ({"overage_rate": D("9.99")}, "The overage rate cannot be below the committed rate."),
    ({"overage_multiplier": D("0.9")}, "The overage multiplier must be at least 1."),
    ({"term_months": 0}, "The term must be between 1 and 120 months."),
    ({"term_months": 121}, "The term must be between 1 and 120 months."),
    ({"guarantee_pct": D("101")}, "The guarantee level must be between 0 and 100%."),
    ({"committed_gpu_hours": D("11905")}, "what the max quota can use in a 31-day period"),
    ({"committed_gpu_hours": D("-1")}, "greater than or equal to 0"),
    ({"currency": "cny"}, "is not an ISO 4217 currency code"),
]


@pytest.mark.parametrize(("change", "message"), IMPOSSIBLE_PLANS)
def test_an_impossible_plan_is_refused_with_a_clear_message(db, change, message):
    plan = Plan(**{**VALID_PLAN, **change})
    with pytest.raises(ValidationError) as caught:
        plan.full_clean()
    assert any(message in text for text in caught.value.messages), caught.value.messages


@pytest.mark.parametrize(("change", "message"), IMPOSSIBLE_PLANS)
def test_the_database_itself_refuses_an_impossible_plan(db, change, message):
    with pytest.raises(IntegrityError), transaction.atomic():
        Plan.objects.create(**{**VALID_PLAN, **change})


def test_a_commitment_the_max_quota_can_just_use_is_allowed(db):
    Plan(**{**VALID_PLAN, "committed_gpu_hours": D(16 * 744)}).full_clean()


def new_contract(tenant, plan, **fields) -> Contract:
    values = dict(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1), time_zone="Asia/Shanghai",
                  status=Contract.Status.ACTIVE)
    return Contract(**{**values, **fields})


def test_a_contract_ends_one_term_after_it_starts(tenant, plan):
    contract = new_contract(tenant, plan, starts_on=date(2026, 1, 31), term_months=13)
    contract.full_clean()
    contract.save()
    assert contract.ends_on == date(2027, 2, 28)
    assert len(contract.periods()) == 13


def test_negotiated_overrides_win_over_the_plan(tenant, plan):
    terms = new_contract(tenant, plan, committed_gpu_hours=D("800"), committed_rate=D("9.5"),
                         overage_multiplier=D("1.5")).terms()
    assert terms.committed_gpu_hours == D("800")
    assert terms.committed_rate == D("9.5")
    assert terms.overage_rate == D("14.25")
    assert terms.base_quota_gpus == 8 and terms.max_quota_gpus == 16
    assert new_contract(tenant, plan).terms().overage_rate == D("12.00")


def test_an_explicit_overage_rate_on_the_plan_survives_a_rate_override(tenant, plan):
    plan.overage_rate = D("15")
    terms = new_contract(tenant, plan, committed_rate=D("9")).terms()
    assert terms.overage_rate == D("15")


@pytest.mark.parametrize(("overrides", "field", "message"), [
    ({"max_quota_gpus": 4}, "max_quota_gpus", "cannot be below the base quota (8)"),
    ({"base_quota_gpus": 20}, "max_quota_gpus", "cannot be below the base quota (20)"),
    ({"committed_gpu_hours": D("20000")}, "committed_gpu_hours", "can never be used"),
    ({"committed_rate": D("13"), "overage_rate": D("12")}, "overage_rate",
     "cannot be below the committed rate"),
    ({"time_zone": "Mars/Olympus"}, "time_zone", "is not an IANA time zone"),
    ({"time_zone": "Asia/Kolkata"}, "time_zone", "off the hour in UTC"),
    # Starts at 13:00 UTC (daylight time, +11) and would end at 13:30 (+10:30): the straddling
    # hour billed 1.0 GPU-h where 0.5 belonged to it.
    ({"time_zone": "Australia/Lord_Howe", "starts_on": date(2026, 3, 15), "term_months": 1},
     "time_zone", "start or end off the hour in UTC (2026-04-14T13:30:00+00:00)"),
    ({"overage_multiplier": D("0.5")}, "__all__", "must be at least 1"),
])
def test_an_impossible_contract_is_refused_with_a_clear_message(
    tenant, plan, overrides, field, message
):
    contract = new_contract(tenant, plan, **overrides)
    with pytest.raises(ValidationError) as caught:
        contract.full_clean()
    errors = caught.value.message_dict
    assert any(message in text for text in errors.get(field, [])), errors


def test_an_overlapping_active_contract_is_refused_by_clean_and_by_the_database(contract, plan):
    clash = new_contract(contract.tenant, plan, starts_on=date(2027, 6, 1))
    with pytest.raises(ValidationError) as caught:
        clash.full_clean()
    assert "already has a contract in force" in str(caught.value.message_dict["starts_on"])
    with pytest.raises(IntegrityError), transaction.atomic():
        clash.save()


def test_the_database_refuses_an_update_that_makes_two_active_contracts_overlap(contract, plan):
    draft = new_contract(contract.tenant, plan, starts_on=date(2027, 3, 1),
                         status=Contract.Status.DRAFT)
    draft.save()
    with pytest.raises(IntegrityError), transaction.atomic():
        Contract.objects.filter(pk=draft.pk).update(status=Contract.Status.ACTIVE)


def test_back_to_back_contracts_and_overlapping_drafts_are_allowed(contract, plan, other_tenant):
    renewal = new_contract(contract.tenant, plan, starts_on=contract.ends_on)
    renewal.full_clean()
    renewal.save()
    draft = new_contract(contract.tenant, plan, status=Contract.Status.DRAFT)
    draft.full_clean()
    draft.save()
    elsewhere = new_contract(other_tenant, plan)
    elsewhere.full_clean()
    elsewhere.save()


def make_statement(contract) -> Statement:
    period = contract.periods()[0]
    return Statement.objects.create(
        contract=contract, period_index=0, period_start=period.start, period_end=period.end,
        committed_gpu_hours=D(1000), allocated_gpu_hours=D(1100), busy_gpu_hours=D(900),
        overage_gpu_hours=D(100), unused_gpu_hours=D(0), committed_rate=D(10),
        overage_rate=D(12), committed_cost=D(10000), overage_cost=D(1200), total_cost=D(11200),
        currency="CNY", completeness=D("0.9987"),
    )


def test_a_statement_is_written_once_and_never_rewritten(contract):
    statement = make_statement(contract)
    statement.total_cost = D(1)
    with pytest.raises(ValidationError, match="never rewritten"):
        statement.save()
    with pytest.raises(DatabaseError), transaction.atomic():
        Statement.objects.filter(pk=statement.pk).update(total_cost=D(1))
    with pytest.raises(IntegrityError), transaction.atomic():
        make_statement(contract)
    statement.refresh_from_db()
    assert statement.total_cost == D(11200)


@pytest.mark.parametrize(("committed", "overage", "total", "kept"), [
    ("0.10", "0.20", "0.30", True),  # 0.1 + 0.2 != 0.3 in floating point (SQLite's columns)
    ("4321.07", "0.01", "4321.08", True),
    ("0.10", "0.20", "0.31", False),
    ("0.10", "0.20", "0.29", False),
])
def test_the_database_checks_that_a_total_adds_up_exactly_on_every_database(
        contract, committed, overage, total, kept):
    period = contract.periods()[0]

    def write():
        return Statement.objects.create(
            contract=contract, period_index=0, period_start=period.start,
            period_end=period.end, committed_gpu_hours=D(1), allocated_gpu_hours=D(2),
            busy_gpu_hours=D(1), overage_gpu_hours=D(1), unused_gpu_hours=D(0),
            committed_rate=D(committed), overage_rate=D(overage), committed_cost=D(committed),
            overage_cost=D(overage), total_cost=D(total), currency="CNY", completeness=D(1))

    if kept:
        assert write().total_cost == D(total)
    else:
        with pytest.raises(IntegrityError), transaction.atomic():
            write()
