"""What sharing would have saved (manage.py what_if_sharing, the fleet page): past periods
replayed from the stated figures, late corrections included; refusals name the reason."""

import json
import re
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from loans.models import Contract, Plan, Tenant
from loans.services.ledger.closing import close_due_periods
from tests.ledger import FEB, GRACE, JAN, MAR, attribute, long_retention, meter  # noqa: F401

D = Decimal
pytestmark = pytest.mark.usefixtures("long_retention")


def signed(tenant, committed="100", currency="CNY", zone="UTC") -> Contract:
    plan = Plan.objects.create(name=f"P{tenant.slug}", base_quota_gpus=1, max_quota_gpus=4,
                               committed_gpu_hours=D(committed), committed_rate=D("10"),
                               term_months=6, currency=currency)
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 1, 1), time_zone=zone,
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


@pytest.fixture
def stated(db):
    """January: vision 130 of 100, nlp 20 of 100; a late 10 for vision reaches January after
    its close. February: both under."""
    vision, nlp = (Tenant.objects.create(slug=s, name=s.upper()) for s in ("vision", "nlp"))
    for tenant in (vision, nlp):
        attribute(tenant)
    a, b = signed(vision), signed(nlp)
    meter("vision", JAN, 130)
    meter("nlp", JAN, 20, gpu_prefix="NLP")
    with time_machine.travel(FEB + GRACE, tick=False):
        close_due_periods(FEB + GRACE)
    meter("vision", JAN.replace(day=9), 10, gpu_prefix="LATE", at=FEB + GRACE)
    meter("vision", FEB, 50)
    with time_machine.travel(MAR + GRACE, tick=False):
        close_due_periods(MAR + GRACE)
    return a, b


def what_if(*args) -> str:
    out = StringIO()
    call_command("what_if_sharing", *args, stdout=out)
    return out.getvalue()


def test_the_replay_prices_each_period_shared_from_its_final_billed_hours(stated):
    a, b = stated
    body = json.loads(what_if("--contracts", f"{a.pk},{b.pk}", "--periods", "3", "--json"))
    # January: vision's final 140 (130 + 10 late) borrows 40 of nlp's 80 unused at 10 instead
    # of paying 12: 80 saved. February: nobody is over: nothing.
    assert [(p["alone"], p["sharing"], p["saving"]) for p in body["periods"]] == [
        ("2480.00", "2000.00", "480.00"), ("2000.00", "2000.00", "0.00")]
    assert {c["tenant"]: c["saving"] for c in body["contracts"]} == {
        "vision": "80.00", "nlp": "400.00"}
    assert body["saving"] == "480.00"
    table = what_if("--contracts", f"{a.pk},{b.pk}")
    assert "480.00" in table and f"{a.pk} VISION: 80.00 CNY" in table


@pytest.mark.parametrize(("args", "says"), [
    (["--contracts", "x,2"], "contract ids separated by commas"),
    (["--contracts", "0"], "contract ids (1 or more)"),
    (["--contracts", "999998,999999"], "No contract 999998, 999999"),
    (["--periods", "0"], "Replay 1 to 36 periods"),
])
def test_what_cannot_be_replayed_is_refused_with_the_reason(stated, args, says):
    a, b = stated
    if args[0] == "--periods":
        args = ["--contracts", f"{a.pk},{b.pk}", *args]
    with pytest.raises(CommandError, match=re.escape(says)):
        what_if(*args)


def test_one_contract_or_another_currency_cannot_share(stated):
    a, b = stated
    with pytest.raises(CommandError, match="at least two contracts"):
        what_if("--contracts", f"{a.pk},{a.pk}")
    usd = signed(Tenant.objects.create(slug="usd", name="USD"), currency="USD")
    with pytest.raises(CommandError, match="CNY, USD: a group shares one currency"):
        what_if("--contracts", f"{a.pk},{usd.pk}")


def test_the_fleet_page_shows_what_sharing_would_have_saved(stated, client, operator):
    with time_machine.travel(MAR + GRACE, tick=False):
        client.force_login(operator)
        page = client.get("/en/fleet/").content.decode()
    assert "What sharing would have saved" in page
    assert 'data-saving="480.00' in page
