"""A new token cannot fill the past (DESIGN.md, "Trust"): intake takes a node's samples only
from the node's registration and within the back-fill horizon; stored usage is never
recounted by the rule."""

from datetime import timedelta
from importlib import import_module

import pytest
from django.apps import apps
from django.utils import timezone

from metering.models import AttributionRule, Node, TenantHour, UsageSample
from tests.metering.intake.test_ingest_api import iso, post, sample

HOUR = timedelta(hours=1)


@pytest.fixture
def horizon(settings):
    settings.BACKFILL_HORIZON_DAYS = 7  # the default (tests/conftest.py widens it)


def billed(tenant) -> float:
    return sum(TenantHour.objects.filter(tenant=tenant).values_list("allocated_gpu_s",
                                                                  flat=True)) / 3600


def test_a_node_registered_minutes_ago_cannot_report_the_days_before(client, tenant, horizon):
    """The review's case: a node made minutes earlier put 8 GPUs over past weeks on a tenant
    (6,520 GPU-h, and a correction on its closed period). Now every sample from before the
    node's registration is refused, saying why, and its live samples are kept."""
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision")
    registered = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
    node = Node.objects.create(name="gpu-node-01", created_at=registered)
    token = node.issue_token()
    past = [sample(g, 0, ts=iso(registered - k * HOUR), interval_s=3600)
            for g in range(8) for k in range(1, 6 * 24)]
    answer = post(client, token, past).json()
    assert answer["accepted"] == 0 and len(answer["rejected"]) == len(past)
    assert answer["rejected"][0]["error"].endswith(
        f"is before node gpu-node-01 was registered (before {registered:%Y-%m-%dT%H:%M:%SZ})")
    live = [sample(g, 0, ts=iso(registered + timedelta(minutes=1))) for g in range(8)]
    assert post(client, token, live).json()["accepted"] == 8
    assert billed(tenant) == pytest.approx(8 / 60)


def test_samples_past_the_back_fill_horizon_are_refused_and_younger_ones_kept(
        client, token, tenant, horizon):
    now = timezone.now().replace(second=0, microsecond=0)
    old = sample(0, 0, ts=iso(now - timedelta(days=7, minutes=1)))
    young = sample(0, 0, ts=iso(now - timedelta(days=6, hours=23)))
    answer = post(client, token, [old, young]).json()
    assert answer["accepted"] == 1
    assert [r["index"] for r in answer["rejected"]] == [0]
    assert "is older than the back-fill horizon of 7 days" in answer["rejected"][0]["error"]


def test_the_rule_never_recounts_what_is_stored(client, token, node, tenant, horizon):
    """Samples stored before the node's registration was set later stay billed."""
    now = timezone.now().replace(second=0, microsecond=0)
    assert post(client, token, [sample(0, 0, ts=iso(now - HOUR))]).json()["accepted"] == 1
    node.created_at = now
    node.save(update_fields=["created_at"])
    assert post(client, token, [sample(0, 0, ts=iso(now - 2 * HOUR))]).json()["accepted"] == 0
    assert UsageSample.objects.count() == 1 and billed(tenant) == pytest.approx(1 / 60)


def test_a_node_from_before_the_rule_is_registered_at_its_first_stored_sample(
        client, token, node):
    """The migration: an existing node's registration is its first stored sample's time,
    where that is earlier, so nothing it spooled within the horizon is refused."""
    now = timezone.now().replace(second=0, microsecond=0)
    first = now - timedelta(days=3)
    post(client, token, [sample(0, 0, ts=iso(first)), sample(0, 0, ts=iso(now - HOUR))])
    Node.objects.filter(pk=node.pk).update(created_at=now)
    untouched = Node.objects.create(name="gpu-node-02", created_at=now)
    migration = import_module("metering.migrations.0017_node_created_at")
    migration.first_samples(apps, None)
    node.refresh_from_db()
    untouched.refresh_from_db()
    assert node.created_at == first and untouched.created_at == now
