"""A metered story for the dashboard tests (fixtures `frozen` and `metered`): three GPUs of the
vision tenant reporting every hour from the contract's start (2026-11-01, Asia/Shanghai) until
NOW, posted through agent protocol v1 like an agent would. `expected_hours` gives the same
usage computed here, from the story, without the database."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from loans.maths.figures import HourUsage
from metering.models import AttributionRule, Gpu, Node

NOW = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)  # period 2 of the contract, 3.5 days in
START = datetime(2026, 10, 31, 16, 0, tzinfo=UTC)  # 2026-11-01 00:00 in Asia/Shanghai
GPUS = 3
HOUR = timedelta(hours=1)


def held(gpu: int, k: int) -> bool:
    return k % (gpu + 2) != 0


def util(gpu: int, k: int) -> float:
    return 40.0 + 10 * gpu + (k % 5) * 5


def story_hours() -> list[datetime]:
    hours, hour = [], START
    while hour < NOW:
        hours.append(hour)
        hour += HOUR
    return hours


def expected_hours() -> list[HourUsage]:
    out = []
    for k, hour in enumerate(story_hours()):
        gpus = [g for g in range(GPUS) if held(g, k)]
        out.append(HourUsage(hour, float(len(gpus)), sum(util(g, k) / 100 for g in gpus),
                             float(len(gpus))))
    return out


@pytest.fixture
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield NOW


@pytest.fixture
def metered(frozen, client, contract, tenant):
    """Posts the story; returns the node."""
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision")
    node = Node.objects.create(name="gpu-node-01")
    token = node.issue_token()
    samples = [
        {"gpu_uuid": f"GPU-{g:04d}", "gpu_index": g, "model": "NVIDIA H100 80GB HBM3",
         "ts": hour.isoformat(), "interval_s": 3600, "allocated": held(g, k),
         "util_pct": util(g, k) if held(g, k) else 0.0,
         "owner": {"namespace": "vision"} if held(g, k) else None}
        for k, hour in enumerate(story_hours()) for g in range(GPUS)
    ]
    for i in range(0, len(samples), 500):
        body = {"node": node.name, "agent_version": "0.1.0", "samples": samples[i:i + 500]}
        response = client.post("/api/v1/samples", json.dumps(body),
                               content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 202, response.content
        assert response.json()["rejected"] == []
    # Posted all at once at NOW, as if the agent had reported live all along.
    Gpu.objects.update(first_seen_at=START)
    return node
