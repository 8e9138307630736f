"""The floor in the ledger: a statement measures its period's availability from the jobs that
waited, against the base quota less what the team held, and credits the tier it fell below; a
wait reported after the close is a correction; gpuloans' own holds and the overage QOS count
nothing; the guarantee and its tiers are terms, fixed at signing and amended forward."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.utils import translation

from loans.models import (
    Contract,
    ContractHold,
    Membership,
    OveragePolicy,
    Plan,
    Statement,
    Tenant,
)
from loans.services.advice import plans
from loans.services.alerts.conditions import evaluate_alerts, refresh_contract_alerts
from loans.services.exports import focus, statements
from loans.services.guarantee import fleet as guarantee_fleet
from loans.services.guarantee import holds
from loans.services.ledger import amendments
from loans.services.ledger import read as ledgers
from loans.services.ledger.closing import close_due_periods
from metering.models import Cluster, RawHorizon, default_cluster
from metering.schedulers import waits
from tests.conftest import make_user
from tests.ledger import FEB, GRACE, HOUR, JAN, MAR, attribute, long_retention, meter  # noqa: F401

D = Decimal
pytestmark = pytest.mark.usefixtures("long_retention")
JANUARY_HOURS = 31 * 24


@pytest.fixture
def vision(db) -> Tenant:
    tenant = Tenant.objects.create(slug="vision", name="Vision")
    attribute(tenant)
    return tenant


def signed(tenant: Tenant, *, tiers: str = "95:10, 90:25", guarantee: str = "95") -> Contract:
    plan = Plan.objects.get_or_create(
        name="H100 x2", defaults=dict(
            base_quota_gpus=2, max_quota_gpus=4, committed_gpu_hours=D(1000),
            committed_rate=D("1.00"), overage_rate=D("1.20"), term_months=3, currency="CNY",
            guarantee_pct=D(guarantee), credit_tiers=tiers))[0]
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 1, 1), time_zone="UTC",
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


def waited(start, hours: float, gpus: int = 1, *, key: str = "1", room: bool = True,
           qos: str = "normal", at=None, started: bool = True) -> None:
    """A job of vision's that waited `hours` from `start`, as Slurm's accounting reports it at
    `at` (just after it started, by default)."""
    end = start + timedelta(hours=hours)
    cluster = Cluster.objects.get(pk=default_cluster())
    waits.store(cluster, "slurm", [waits.Seen(
        key=key, name=key, gpus=gpus, submitted=start, eligible=start,
        started=end if started else None, ended=None,
        reason="Resources" if room else "Dependency", capacity=room, namespace="vision",
        qos=qos)], at or end)


def close(at) -> list[Statement]:
    with time_machine.travel(at, tick=False):
        return close_due_periods(at).written


def january(contract: Contract) -> Statement:
    return Statement.objects.get(contract=contract, kind="period", period_index=0)


def test_a_wait_while_the_team_held_less_than_its_base_credits_the_tier_it_fell_below(vision):
    """Base 2, one GPU held all January; a 1-GPU job waits 40 hours, a 2-GPU job beside it
    for 10 of them: min(1 + 2, 2 - 1) = 1 short GPU for 40 hours, never more. 40 of 744
    hours short: 94.62% available, below 95%: 10% of the committed 1,000.00."""
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=3), 40)
    waited(JAN + timedelta(days=3), 10, gpus=2, key="2")
    close(FEB + GRACE)
    s = january(contract)
    assert s.availability == D(1 - 40 / JANUARY_HOURS).quantize(D("0.00000001"))
    assert s.short_gpu_hours == D(40)
    assert (s.guarantee_pct, s.credit_pct, s.credit) == (D(95), D(10), D(-100))
    assert s.total_cost == s.committed_cost + s.overage_cost + s.credit == D(900)
    [line] = [x for x in statements.lines(s) if x.kind == "credit"]
    assert (line.gpu_hours, line.rate, line.amount) == (1, D(-100), D(-100))


def test_the_plan_advice_reads_the_availability_each_statement_measured(vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=3), 40)
    close(FEB + GRACE)
    assert plans.measured_availability(contract) == [january(contract).availability]


def test_a_team_at_its_base_quota_is_not_short_and_below_a_tier_costs_nothing_more(vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS, gpus=2)  # its whole base quota, all month
    waited(JAN + timedelta(days=3), 100)
    close(FEB + GRACE)
    s = january(contract)
    assert (s.availability, s.short_gpu_hours, s.credit) == (1, 0, 0)


def test_waits_for_a_dependency_in_the_overage_qos_or_under_gpuloans_hold_count_nothing(vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=2), 50, key="dependency", room=False)
    waited(JAN + timedelta(days=5), 50, key="overage", qos="gpuloans-overage-vision")
    # Held by its own policy from the 10th for three days: a job waiting then waited on it.
    ContractHold.objects.create(contract=contract, reason="hold", since=JAN + timedelta(days=10),
                                until=JAN + timedelta(days=13))
    waited(JAN + timedelta(days=10), 72, key="held")
    waited(JAN + timedelta(days=20), 10, key="counts")
    close(FEB + GRACE)
    s = january(contract)
    assert s.short_gpu_hours == D(10)
    assert s.credit == 0  # 10 of 744 hours: 98.66%


def test_a_wait_reported_after_the_close_is_a_correction_of_the_credit(vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    close(FEB + GRACE)
    assert january(contract).credit == 0
    # Slurm's accounting arrives late: 80 hours waited in January (89.2%: the 25% tier).
    waited(JAN + timedelta(days=3), 80, at=FEB + GRACE + HOUR)
    close(MAR + GRACE)
    february = Statement.objects.get(contract=contract, period_index=1)
    [line] = february.corrections.all()
    assert (line.credit_before_cost, line.credit_after_cost) == (0, D(-250))
    assert line.amount == D(-250) and line.gpu_hours == 0
    assert february.total_cost == february.committed_cost + D(-250)
    assert january(contract).credit == 0  # the statement itself is never rewritten
    # Read again, nothing more is owed.
    assert ledgers.read(contract, MAR + GRACE + HOUR).pending == []
    rows = focus.focus_rows(ledgers.read(contract, MAR + GRACE + HOUR), "gpuloans")
    [credit] = [r for r in rows if r["ChargeCategory"] == "Credit"]
    assert (credit["ChargeClass"], credit["BilledCost"], credit["EffectiveCost"]) == (
        "Correction", "-250.00", "-250.00")
    assert credit["ChargePeriodStart"] == "2026-01-01T00:00:00Z"


def test_a_period_whose_raw_samples_are_purged_keeps_its_credit(vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=3), 40)
    close(FEB + GRACE)
    RawHorizon.objects.create(purged_before=FEB)  # what the team held in January is gone
    waited(JAN + timedelta(days=20), 60, key="late", at=FEB + GRACE + HOUR)
    assert ledgers.read(contract, MAR).pending == []
    assert ledgers.read(contract, MAR).entries[0].credit == D(-100)


def test_the_floor_shows_in_the_statements_json_and_each_statement_adds_up_in_focus(vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=3), 40)
    close(FEB + GRACE)
    ledger = ledgers.read(contract, FEB + GRACE)
    [stated] = statements.as_json(ledger)["statements"]
    assert stated["floor"] == {"availability": str(january(contract).availability),
                               "guarantee_pct": "95.00", "short_gpu_hours": "40.000000",
                               "credit_pct": "10.00", "credit": "-100.00"}
    rows = focus.focus_rows(ledger, "gpuloans")
    assert sum(D(r["BilledCost"]) for r in rows) == D(900)
    assert sum(D(r["EffectiveCost"]) for r in rows) == D(900)
    [credit] = [r for r in rows if r["ChargeCategory"] == "Credit"]
    assert credit["ChargeClass"] == "" and "94.6237%" in credit["ChargeDescription"]


def test_the_guarantee_and_its_tiers_are_fixed_at_signing_and_amended_forward(vision):
    contract = signed(vision)
    Plan.objects.filter(pk=contract.plan_id).update(credit_tiers="99:50", guarantee_pct=99)
    contract.refresh_from_db()
    assert (contract.terms_for(0).guarantee_pct, contract.terms_for(0).credit_tiers) == (
        D(95), "95:10, 90:25")
    amendments.amend(contract=contract, changes={"credit_tiers": "90:20, 95:5",
                                                 "guarantee_pct": "99"},
                     from_period=1, reason="renegotiated", now=JAN + timedelta(days=1))
    assert contract.terms_for(0).credit_tiers == "95:10, 90:25"
    later = Contract.objects.get(pk=contract.pk).terms_for(1)
    assert (later.credit_tiers, later.guarantee_pct) == ("95:5, 90:20", D(99))
    with pytest.raises(ValidationError, match="smaller credit"):
        amendments.amend(contract=contract, changes={"credit_tiers": "95:20, 90:5, 80:1"},
                         from_period=2, reason="x", now=JAN + timedelta(days=1))
    with pytest.raises(ValidationError, match="between 0 and 100"):
        amendments.amend(contract=contract, changes={"guarantee_pct": "101"},
                         from_period=2, reason="x", now=JAN + timedelta(days=1))


@pytest.mark.django_db
def test_a_plan_refuses_tiers_it_cannot_read():
    plan = Plan(name="x", base_quota_gpus=1, max_quota_gpus=1, committed_gpu_hours=1,
                committed_rate=1, credit_tiers="95 percent")
    with pytest.raises(ValidationError) as refused:
        plan.full_clean()
    assert "level:credit" in str(refused.value.message_dict["credit_tiers"])


def test_the_holds_job_opens_a_hold_when_a_held_period_is_past_its_commitment_and_closes_it(
        vision):
    contract = signed(vision)
    OveragePolicy.objects.create(contract=contract, kind="hold", set_at=JAN)
    meter("vision", JAN, 500, gpus=2)  # the whole commitment, 1,000 GPU-hours, by the 21st
    at = JAN + timedelta(days=22)
    with time_machine.travel(at, tick=False):
        assert holds.note(at) == holds.Noted(1, 0)
        assert holds.note(at + timedelta(minutes=1)) == holds.Noted(0, 0)  # still held
    with time_machine.travel(FEB + HOUR, tick=False):
        assert holds.note(FEB + HOUR) == holds.Noted(0, 1)  # February starts unspent
    [hold] = ContractHold.objects.all()
    assert (hold.reason, hold.since, hold.until) == ("hold", at, FEB)


def test_the_lead_reads_the_floor_its_credit_and_the_longest_waits(client, vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=3), 40)
    waited(JAN + timedelta(days=9), 5, gpus=2, key="2")
    close(FEB + GRACE)
    lead = make_user("lead")
    Membership.objects.create(user=lead, tenant=vision, role=Membership.Role.LEAD)
    client.force_login(lead)
    with time_machine.travel(FEB + GRACE + HOUR, tick=False):
        page = client.get(f"/en/tenants/vision/?contract={contract.pk}&period=1")
        chinese = client.get(f"/zh-hans/tenants/vision/?contract={contract.pk}&period=1")
    html = page.content.decode()
    # 40 + 5 hours short of 744: 93.95%, below 95% and above 90%: the 10% tier.
    assert 'data-below="1"' in html and "93.95% of the time" in html
    assert "the contract guarantees 95%" in html and "short 45.00 GPU-h" in html
    assert "service credit of 100.00 CNY" in html and 'data-figure="credit"' in html
    # The statement's own rows carry the credit too: without it they did not add up to the
    # total the page printed under them.
    rows = html[html.index('id="statement-list"'):]
    assert 'data-credit="-100' in rows and ("Service credit: availability 93.95% against 95% "
                                             "guaranteed, 10% of the committed cost") in rows
    waits_table = html[html.index('id="waits"'):html.index("</table>", html.index('id="waits"'))]
    assert waits_table.index('data-job="1"') < waits_table.index('data-job="2"')  # longest first
    assert "保障" in chinese.content.decode() and "93.95%" in chinese.content.decode()


def test_a_period_without_waits_says_so(client, vision):
    contract = signed(vision, tiers="")
    meter("vision", JAN, 10)
    lead = make_user("lead")
    Membership.objects.create(user=lead, tenant=vision, role=Membership.Role.LEAD)
    client.force_login(lead)
    with time_machine.travel(JAN + timedelta(days=2), tick=False):
        html = client.get(f"/en/tenants/vision/?contract={contract.pk}").content.decode()
    assert 'id="no-waits"' in html and "100.00% of the time" in html
    assert "This contract has no service credits." in html


def test_the_burndown_api_carries_the_floor(client, vision):
    contract = signed(vision)
    meter("vision", JAN, JANUARY_HOURS)
    waited(JAN + timedelta(days=3), 40)
    close(FEB + GRACE)
    member = make_user("member")
    Membership.objects.create(user=member, tenant=vision, role=Membership.Role.MEMBER)
    client.force_login(member)
    with time_machine.travel(FEB + GRACE + HOUR, tick=False):
        body = client.get(f"/api/v1/contracts/{contract.pk}/burndown?period=1").json()
    floor = body["floor"]
    assert (floor["guarantee_pct"], floor["below_guarantee"], floor["short_gpu_hours"]) == (
        "95.00", True, "40.000000")
    assert (floor["credit_pct"], floor["credit"], floor["waits"]) == ("10.00", "-100.00", 1)
    assert floor["longest_waits"] == [{"cluster": "default", "job": "1", "gpus": 1,
                                       "from": "2026-01-04T00:00:00+00:00",
                                       "to": "2026-01-05T16:00:00+00:00", "held_gpus": 1.0}]
    assert body["cost_so_far"]["credit"] == "-100.00"


def test_the_fleet_shows_each_contracts_availability_its_credit_and_its_pool_then(client,
                                                                                  vision):
    """Ten days into January: 40 of 240 hours short (83.33%: the 25% tier, 250.00 of the
    committed 1,000.00 so far); the pool then had one GPU reporting against a base quota of
    two guaranteed: over-committed."""
    signed(vision)
    meter("vision", JAN, 240)
    waited(JAN + timedelta(days=3), 40)
    client.force_login(make_user("operator", staff=True))
    at = JAN + timedelta(days=10)
    with time_machine.travel(at, tick=False):
        html = client.get("/en/fleet/?sort=availability&dir=asc").content.decode()
        csv = client.get("/en/fleet.csv").content.decode().splitlines()
    assert 'data-availability="0.83333333"' in html and "credit 250.00 CNY" in html
    start = html.index('id="floor-table"')
    row = html[start:html.index("</table>", start)]
    assert 'data-credit="-250.00"' in row and 'data-over-committed="1"' in row
    assert "2 GPUs guaranteed, 1 reporting" in row
    exported = dict(zip(csv[0].split(","), csv[1].split(","), strict=True))
    assert (exported["availability"], exported["credit"]) == ("0.83333333", "-250.00")


def test_an_alert_opens_near_the_guarantee_names_the_longest_wait_and_survives_a_policy_change(
        vision, settings):
    settings.GUARANTEE_ALERT_POINTS = 1
    contract = signed(vision)
    meter("vision", JAN, 240)
    waited(JAN + timedelta(days=3), 6)  # 6 of 240 hours: 97.5%, 2.5 points above 95%
    at = JAN + timedelta(days=10)
    with time_machine.travel(at, tick=False):
        assert not [a for a in evaluate_alerts(at).opened if a.kind == "guarantee_at_risk"]
    waited(JAN + timedelta(days=5), 10, gpus=2, key="2")  # 16 of 240: 93.33%, below
    with time_machine.travel(at, tick=False):
        [alert] = [a for a in evaluate_alerts(at).opened if a.kind == "guarantee_at_risk"]
        assert alert.tenant == vision and alert.subject == f"floor:contract:{contract.pk}:period:1"
        assert "93.33% of period 1 so far, below its guarantee of 95%" in alert.message
        assert "the longest 2 (2 GPUs from 2026-01-06 00:00)" in alert.message
        assert "credits 100.00 CNY" in alert.message  # below 95%, above 90%: 10%
        assert len(alert.details["waits"]) == 2
        with translation.override("zh-hans"):
            assert "保障" in alert.text
        refresh_contract_alerts(contract, at)  # a policy change refreshes the commitment's
        alert.refresh_from_db()
        assert alert.state == "open"


def test_the_fleets_floor_reads_the_same_queries_for_two_short_contracts_as_for_five(
        db, django_assert_num_queries):
    """Waits, holds, raw horizon, held samples, pools then: one query each, however many
    contracts were short (the plan names no GPU model: the clusters' models are not read)."""
    at = JAN + timedelta(days=10)

    def fleet(n: int) -> list[Contract]:
        contracts = []
        for k in range(n):
            tenant = Tenant.objects.create(slug=f"team{n}-{k}", name=f"Team {n}-{k}")
            attribute(tenant)
            contracts.append(signed(tenant))
            meter(tenant.slug, JAN, 240, gpu_prefix=f"G{n}-{k}")
            cluster = Cluster.objects.get(pk=default_cluster())
            waits.store(cluster, "slurm", [waits.Seen(
                key=f"{n}-{k}", name=f"{n}-{k}", gpus=1, submitted=JAN + timedelta(days=3),
                eligible=JAN + timedelta(days=3), started=JAN + timedelta(days=4), ended=None,
                reason="Resources", capacity=True, namespace=tenant.slug)], at)
        return [Contract.objects.select_related("tenant", "plan").prefetch_related(
            "amendments").get(pk=c.pk) for c in contracts]

    small, large = fleet(2), fleet(5)
    counts = []
    for contracts in (small, large):
        with django_assert_num_queries(5) as captured:
            found = guarantee_fleet.floors(contracts, at)
        counts.append(len(captured))
        assert all(f.floor.short_gpu_hours > 0 for f in found.values())
    assert counts[0] == counts[1]
