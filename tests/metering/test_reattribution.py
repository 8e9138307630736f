"""Re-attribution: an operator moves a time range's usage (a node's, an owner value's, or the
unattributed usage) to a tenant; it is kept for good and flows into open periods at once and
into corrections on both sides of closed ones."""

from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError

from loans.models import Contract, CorrectionLine, Plan
from loans.services.ledger.closing import close_due_periods
from metering.intake import protocol
from metering.intake.ingest import ingest
from metering.models import RawHorizon, Reattribution, TenantHour
from metering.retention import purge_raw_samples
from metering.services import reattribute
from metering.usage import ceil_hour, tenant_totals
from tests.helpers import assert_rollups_equal_a_recount
from tests.ledger import (
    FEB,
    GRACE,
    JAN,
    MAR,
    attribute,
    meter,
    node,
)

D = Decimal

@pytest.fixture
def two_tenants(tenant, other_tenant, db):
    plan = Plan.objects.create(name="Small", base_quota_gpus=1, max_quota_gpus=4,
                               committed_gpu_hours=D(100), committed_rate=D("10.00"),
                               overage_rate=D("12.00"), term_months=3, currency="CNY")
    for t in (tenant, other_tenant):
        attribute(t)
        contract = Contract(tenant=t, plan=plan, starts_on=date(2026, 1, 1), time_zone="UTC",
                            status=Contract.Status.ACTIVE)
        contract.full_clean()
        contract.save()
    return tenant, other_tenant


def used(tenant, start=JAN, end=FEB) -> float:
    return tenant_totals(tenant.pk, start, end).allocated_gpu_hours


def test_a_namespace_s_usage_moves_and_the_move_is_kept(two_tenants, operator):
    vision, speech = two_tenants
    meter("vision", JAN, 10)
    meter("speech", JAN, 10, gpu_prefix="S")
    move = reattribute(scope="namespace", value="vision", start=JAN, end=JAN + timedelta(hours=4),
                       tenant_id=speech.pk, reason="ran speech's jobs", author=operator,
                       now=FEB)
    assert (used(vision), used(speech)) == (6, 14)
    assert move.samples == 4 and move.gpu_hours == 4
    assert move.moved_from == {str(vision.pk): 4.0}
    assert Reattribution.objects.get().author == operator
    assert_rollups_equal_a_recount()


def test_a_node_s_and_unattributed_usage_move_too(two_tenants):
    vision, speech = two_tenants
    other = node("gpu-node-02")
    meter(None, JAN, 5, gpu_prefix="U")  # nobody claims it
    meter("vision", JAN, 3, gpu_prefix="N2", on=other)
    reattribute(scope="unattributed", value="", start=JAN, end=FEB, tenant_id=vision.pk,
                reason="sandbox was vision's", now=FEB)
    assert tenant_totals(None, JAN, FEB).allocated_gpu_hours == 0 and used(vision) == 8
    reattribute(scope="node", value="gpu-node-02", start=JAN, end=FEB, tenant_id=speech.pk,
                reason="node lent to speech", now=FEB)
    assert (used(vision), used(speech)) == (5, 3)


def test_moving_usage_of_closed_periods_corrects_both_sides(two_tenants):
    vision, speech = two_tenants
    meter("vision", JAN, 130)
    meter("speech", JAN, 100, gpu_prefix="S")
    with time_machine.travel(FEB + GRACE, tick=False):
        close_due_periods(FEB + GRACE)
    reattribute(scope="namespace", value="vision", start=JAN, end=JAN + timedelta(hours=20),
                tenant_id=speech.pk, reason="mislabelled jobs", now=FEB + GRACE)
    with time_machine.travel(MAR + GRACE, tick=False):
        close_due_periods(MAR + GRACE)
    lines = {c.statement.contract.tenant.slug: (c.gpu_hours, c.amount)
             for c in CorrectionLine.objects.select_related("statement__contract__tenant")}
    assert lines == {"vision": (-20, D("-240.00")), "speech": (20, D("240.00"))}


def test_a_move_is_refused_with_a_reason_for_each_problem(two_tenants, settings):
    vision, _speech = two_tenants
    with pytest.raises(ValidationError) as caught:
        reattribute(scope="planet", value="", start=FEB, end=JAN, tenant_id=vision.pk,
                    reason=" ", now=FEB)
    assert set(caught.value.message_dict) == {"scope", "end", "reason"}
    with pytest.raises(ValidationError, match="no node named"):
        reattribute(scope="node", value="ghost", start=JAN, end=FEB, tenant_id=vision.pk,
                    reason="r", now=FEB)
    with pytest.raises(ValidationError, match="leave it empty"):
        reattribute(scope="unattributed", value="x", start=JAN, end=FEB, tenant_id=vision.pk,
                    reason="r", now=FEB)
    meter("vision", JAN, 24)
    settings.RAW_RETENTION_DAYS = 10
    purge_raw_samples(FEB)
    with pytest.raises(ValidationError, match="have been purged"):
        reattribute(scope="namespace", value="vision", start=JAN, end=FEB, tenant_id=vision.pk,
                    reason="r", now=FEB)
    assert TenantHour.objects.filter(hour__lt=JAN + timedelta(days=1)).count() == 24


def test_operators_move_usage_over_the_api(client, two_tenants, operator, lead):
    vision, speech = two_tenants
    meter("vision", JAN, 10)
    client.force_login(lead)
    body = {"scope": "namespace", "value": "vision", "start": JAN.isoformat(),
            "end": FEB.isoformat(), "tenant": "speech", "reason": "r"}
    assert client.post("/api/v1/reattributions/", body,
                       content_type="application/json").status_code == 403
    client.force_login(operator)
    with time_machine.travel(FEB, tick=False):
        response = client.post("/api/v1/reattributions/", body, content_type="application/json")
        assert response.status_code == 201, response.content
        assert response.json()["gpu_hours"] == "10.000000"
        refused = client.post("/api/v1/reattributions/", {**body, "scope": "node"},
                              content_type="application/json")
    assert refused.status_code == 400 and "no node named" in str(refused.json())
    assert used(speech) == 10


def post_one(ts: datetime, interval_s: int = 3600, gpu: str = "GPU-X") -> None:
    on = node()
    envelope = protocol.Envelope(on.name, "test", 0, [
        {"gpu_uuid": gpu, "ts": ts.isoformat(), "interval_s": interval_s, "allocated": True,
         "util_pct": 50.0, "owner": {"namespace": "vision"}}])
    assert ingest(on, envelope, now=FEB).accepted == 1


def test_a_sample_crossing_the_ranges_end_moves_only_its_part_inside(two_tenants):
    vision, speech = two_tenants
    post_one(JAN + timedelta(hours=2, minutes=30))  # 02:30 to 03:30
    move = reattribute(scope="namespace", value="vision", start=JAN,
                       end=JAN + timedelta(hours=3), tenant_id=speech.pk, reason="r", now=FEB)
    assert (used(vision), used(speech)) == (0.5, 0.5)
    assert move.gpu_hours == D("0.5")
    assert_rollups_equal_a_recount()


def test_a_sample_crossing_the_ranges_start_moves_only_its_part_inside(two_tenants):
    vision, speech = two_tenants
    post_one(JAN + timedelta(hours=2, minutes=30))  # 02:30 to 03:30
    reattribute(scope="namespace", value="vision", start=JAN + timedelta(hours=3),
                end=JAN + timedelta(hours=4), tenant_id=speech.pk, reason="r", now=FEB)
    assert (used(vision), used(speech)) == (0.5, 0.5)
    assert_rollups_equal_a_recount()


def test_a_move_never_starts_in_the_hours_whose_rollups_the_horizon_keeps(two_tenants,
                                                                          settings):
    vision, speech = two_tenants
    meter("vision", JAN, 24 * 20)
    settings.RAW_RETENTION_DAYS = 10
    purge_raw_samples(JAN + timedelta(days=20))
    horizon = RawHorizon.complete_from()
    with pytest.raises(ValidationError, match="have been purged"):
        reattribute(scope="namespace", value="vision", start=horizon,
                    end=horizon + timedelta(hours=8), tenant_id=speech.pk, reason="r",
                    now=FEB)
    first = ceil_hour(horizon) + timedelta(hours=1)
    move = reattribute(scope="namespace", value="vision", start=first,
                       end=first + timedelta(hours=8), tenant_id=speech.pk, reason="r",
                       now=FEB)
    assert used(speech) == float(move.gpu_hours) == 8.0
