"""The agents' meter against Slurm's accounting where people read it: the tenant page (for
operators), the fleet page, and an alert when yesterday's differ by more than the setting."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings

from loans.models import Alert
from loans.services.alerts import conditions as alerts
from metering.models import AttributionRule, Cluster, Gpu, GpuHour, Node
from metering.schedulers.slurm.accounting import import_jobs
from metering.schedulers.slurm.sacct import Job

ZONE = ZoneInfo(settings.TIME_ZONE)


@pytest.fixture
def yesterday_noon() -> datetime:
    day = datetime.now(ZONE).date() - timedelta(days=1)
    return datetime(day.year, day.month, day.day, 12, tzinfo=ZONE).astimezone(UTC)


@pytest.fixture
def hpc(db, tenant, yesterday_noon):
    """Yesterday Slurm says team-a (the tenant's account) held 4 GPUs for 3 hours; the agents
    metered 2 of them."""
    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    start = yesterday_noon
    import_jobs(cluster, [Job("7", "team-a", "alice", 4, start, start + timedelta(hours=3),
                              "COMPLETED")], start + timedelta(hours=5))
    node = Node.objects.create(name="hpc-node-01", cluster=cluster)
    for k in range(2):
        gpu = Gpu.objects.create(uuid=f"GPU-{k}", node=node, index=k, model="H100")
        for h in range(3):
            GpuHour.objects.create(gpu=gpu, tenant=tenant, hour=start + timedelta(hours=h),
                                   allocated_gpu_s=3600, busy_gpu_s=1800, sample_count=60,
                                   peak_gpus=1, reported_s=3600)
    return cluster


def test_operators_see_the_two_meters_side_by_side_on_the_tenant_page(hpc, client, operator,
                                                                      yesterday_noon):
    client.force_login(operator)
    page = client.get("/en/tenants/vision/")
    [row] = page.context["meter_checks"]
    check = row["check"]
    assert (check.agents_gpu_hours, check.slurm_gpu_hours, check.difference) == (6.0, 12.0, -6.0)
    assert check.share == -0.5 and row["over"]
    assert check.day == yesterday_noon.astimezone(ZONE).date()
    assert b'id="meter-check"' in page.content and b'data-difference="-6.0"' in page.content


def test_a_lead_does_not_see_the_meter_check(hpc, client, lead):
    client.force_login(lead)
    page = client.get("/en/tenants/vision/")
    assert page.context["meter_checks"] == [] and b'id="meter-check"' not in page.content


def test_the_fleet_page_lists_the_tenant_days_that_differ_most(hpc, client, operator):
    client.force_login(operator)
    page = client.get("/en/fleet/")
    [row] = page.context["meter_checks"]
    assert row["tenant"].slug == "vision" and row["check"].difference == -6.0
    assert b"Vision Lab" in page.content.split(b'id="meter-check"')[1]


def test_the_check_is_in_chinese_too(hpc, client, operator):
    client.force_login(operator)
    page = client.get("/zh-hans/fleet/")
    assert "Slurm 记账" in page.content.decode().split('id="meter-check"')[1][:300]


def test_yesterdays_gap_opens_an_operators_alert_and_closing_it_resolves_it(hpc, tenant):
    now = datetime.now(UTC)
    run = alerts.evaluate_alerts(now)
    [alert] = [a for a in run.opened if a.kind == Alert.Kind.METER_MISMATCH]
    assert alert.tenant is None  # the operators' (a lead cannot fix a node or a rule)
    assert "Vision Lab" in alert.text and "12.0" in alert.text and "50.0%" in alert.text
    assert alert.details["slurm_gpu_hours"] == 12.0
    # The other two GPUs' hours arrive (an agent restarted and sent its spool).
    gpu_rows = list(GpuHour.objects.filter(gpu__uuid="GPU-0"))
    for k in (2, 3):
        gpu = Gpu.objects.create(uuid=f"GPU-{k}", node=Node.objects.get(), index=k, model="H100")
        for row in gpu_rows:
            GpuHour.objects.create(gpu=gpu, tenant=tenant, hour=row.hour, allocated_gpu_s=3600,
                                   busy_gpu_s=0, sample_count=60, peak_gpus=1, reported_s=3600)
    again = alerts.evaluate_alerts(now)
    assert alert.pk in {a.pk for a in again.resolved}


def test_a_small_gap_opens_nothing(hpc, settings):
    settings.SLURM_MISMATCH_PERCENT = 60
    assert alerts.mismatch_conditions(datetime.now(UTC)) == []
