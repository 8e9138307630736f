"""Sharing that never costs a member more than going alone, and the ledger's last edges
(DESIGN "Sharing a commitment"): a borrower borrows only below its own overage rate; a
cancelled contract lends nothing; a renewal joins its team's group; an ended contract's
removal is answered, not refused; group figures are for leads; the what-if and the advice
share by the same rule."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from loans.maths import admission
from loans.maths.billing import Terms
from loans.maths.sharing import Member, share
from loans.models import (
    Contract,
    Membership,
    Plan,
    SharingGroup,
    SharingLine,
    SharingMember,
    Statement,
    Tenant,
)
from loans.services.advice import what_if
from loans.services.ledger import sharing
from loans.services.ledger.closing import close_due_periods
from tests.conftest import make_user
from tests.ledger import FEB, GRACE, JAN, MAR, attribute, long_retention, meter  # noqa: F401

D = Decimal
pytestmark = pytest.mark.usefixtures("long_retention")


def signed(slug: str, *, committed: str, rc: str, ro: str, months: int = 3,
           starts_on: date = date(2026, 1, 1), fee: str = "0") -> Contract:
    tenant = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.upper()})[0]
    attribute(tenant)
    plan = Plan.objects.create(name=f"P{Plan.objects.count()}", base_quota_gpus=1,
                               max_quota_gpus=8, committed_gpu_hours=D(committed),
                               committed_rate=D(rc), overage_rate=D(ro), term_months=months,
                               currency="CNY", upfront_fee=D(fee))
    contract = Contract(tenant=tenant, plan=plan, starts_on=starts_on, time_zone="UTC",
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


def grouped(*contracts: Contract, at: datetime = JAN - timedelta(days=1)) -> SharingGroup:
    group = SharingGroup.objects.create(name=f"org{SharingGroup.objects.count()}",
                                        currency="CNY")
    for contract in contracts:
        sharing.join(group, contract, by=None, now=at)
    return group


def close(at: datetime) -> list[Statement]:
    with time_machine.travel(at, tick=False):
        return close_due_periods(at).written


def total(contract: Contract, index: int = 0) -> Decimal:
    return Statement.objects.get(contract=contract, kind="period", period_index=index).total_cost


@pytest.mark.django_db
def test_a_borrower_never_pays_a_lender_more_than_its_own_overage_rate():
    """A lender at 20.00 and a borrower committed to 10 GPU-h at 5.00, overage 6.00, with an
    overage budget of 300.00 (3,000 GPU-minutes past the commitment): using exactly its
    60 GPU-h, it pays 50 + 300 = 350.00 as it would alone, not 50 + 1,000 borrowed at 20."""
    lender = signed("lender", committed="100", rc="20", ro="24")
    borrower = signed("borrower", committed="10", rc="5", ro="6")
    grouped(lender, borrower)
    budgets = admission.budgets(committed_gpu_hours=D(10), overage_rate=D(6),
                                policy=admission.BUDGET, budget=D(300))
    assert (budgets.commitment_minutes, budgets.overage_minutes) == (600, 3000)
    meter("borrower", JAN, 60)
    close(FEB + GRACE)
    assert total(borrower) == D("350.00")
    assert total(lender) == D("2000.00")  # its commitment, nothing lent
    assert not SharingLine.objects.exists()


def test_sharing_with_a_cheaper_and_a_dearer_lender_takes_only_the_cheaper():
    terms = {1: ("50", "5", "6"), 2: ("30", "4", "5"), 3: ("30", "7", "8")}
    rows = [Member(pk, Terms(0, 0, D(c), D(rc), D(ro), 1, "CNY"), D(u))
            for pk, (c, rc, ro), u in ((1, terms[1], 90), (2, terms[2], 0), (3, terms[3], 0))]
    result = share(rows, "CNY")
    assert [(t.lender, t.gpu_hours, t.rate) for t in result[1].borrowed] == [(2, 30, D(4))]
    assert result[1].overage_gpu_hours == 10  # lender 3's 7.00 is above its 6.00
    assert result[3].lent == ()


@pytest.mark.django_db
def test_a_contract_cancelled_before_its_start_lends_nothing():
    """X joins before its start, then is cancelled: A's February is billed alone (1,000 +
    50 x 12 = 1,600.00), the membership is kept and marked void."""
    a = signed("a", committed="100", rc="10", ro="12", starts_on=date(2026, 2, 1))
    with time_machine.travel(JAN, tick=False):
        x = signed("x", committed="100", rc="5", ro="6", starts_on=date(2026, 2, 1))
        grouped(a, x, at=JAN)
        x.status = Contract.Status.CANCELLED
        x.full_clean()
        x.save()
    member = SharingMember.objects.get(contract=x)
    assert member.voided_at is not None and member.is_void
    meter("a", FEB, 150)
    close(MAR + GRACE)
    assert total(a) == D("1600.00")
    assert not SharingLine.objects.exists()
    assert not Statement.objects.filter(contract=x).exists()


@pytest.mark.django_db
def test_a_renewal_joins_its_teams_group_and_removing_the_ended_contract_is_answered(client):
    """vision's contract ends with February in a group with nlp; its renewal joins from its
    own first period and borrows nlp's unused hours in March; removing the ended contract
    says it ended, twice alike, instead of refusing."""
    old = signed("vision", committed="100", rc="10", ro="12", months=2)
    nlp = signed("nlp", committed="600", rc="5", ro="6", months=6)
    group = grouped(old, nlp)
    renewal = signed("vision", committed="100", rc="10", ro="12", months=3,
                     starts_on=date(2026, 3, 1))
    member = sharing.join(group, renewal, by=None, now=FEB + timedelta(days=3))
    assert member.joins_at == MAR
    meter("vision", MAR, 150)
    close(datetime(2026, 4, 1, tzinfo=UTC) + GRACE)
    statement = Statement.objects.get(contract=renewal, period_index=0)
    assert statement.total_cost == D("1250.00")  # 1,000 + 50 borrowed at nlp's 5.00
    operator = make_user("ops", staff=True)
    client.force_login(operator)
    with time_machine.travel(datetime(2026, 4, 2, tzinfo=UTC), tick=False):
        for _twice in range(2):
            left = client.delete(f"/api/v1/sharing-groups/{group.pk}/contracts/{old.pk}/")
            assert left.status_code == 200, left.content
            assert left.json()["detail"] == (
                f"Contract {old.pk} ended on 2026-03-01: its membership ended with it.")
    [row] = [m for m in left.json()["members"] if m["contract"] == old.pk]
    assert row["until"] is None and row["ends"] == MAR.isoformat()


@pytest.mark.django_db
def test_a_member_who_is_not_a_lead_sees_no_group_figures(client):
    vision = signed("vision", committed="100", rc="10", ro="12")
    nlp = signed("nlp", committed="600", rc="5", ro="6")
    group = grouped(vision, nlp)
    member, lead = make_user("vision-member"), make_user("vision-lead")
    Membership.objects.create(user=member, tenant=vision.tenant, role=Membership.Role.MEMBER)
    Membership.objects.create(user=lead, tenant=vision.tenant, role=Membership.Role.LEAD)
    at = JAN + timedelta(days=5)
    meter("vision", JAN, 24)
    with time_machine.travel(at, tick=False):
        client.force_login(member)
        assert client.get("/api/v1/sharing-groups/").json() == []
        assert client.get(f"/api/v1/sharing-groups/{group.pk}/").status_code == 404
        page = client.get("/en/tenants/vision/").content.decode()
        assert 'id="pool"' not in page
        client.force_login(lead)
        assert [g["name"] for g in client.get("/api/v1/sharing-groups/").json()] == [group.name]
        assert 'id="pool"' in client.get("/en/tenants/vision/").content.decode()


@pytest.mark.django_db
def test_a_what_if_with_a_dearer_lender_shows_no_borrowing_from_it():
    borrower = signed("borrower", committed="10", rc="5", ro="6")
    lender = signed("lender", committed="100", rc="20", ro="24")
    meter("borrower", JAN, 60)
    close(FEB + GRACE)
    replay = what_if.what_if([borrower, lender], 1)
    [period] = replay.periods
    assert period.shared_gpu_hours == 0 and replay.saving == 0

