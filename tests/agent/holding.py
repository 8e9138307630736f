"""What the allocation-source tests share: GPUs that run nothing, an hour of polls through the
real agent, and the usage API read as a client reads it."""

from datetime import UTC, datetime, timedelta

from agent.client import Client
from agent.holders import Holders
from agent.readings import Reading
from agent.runner import Agent
from agent.spool import Spool

# A whole past hour, so that every sample is in the past and the hour is complete.
HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)


class IdleCollector:
    """GPUs (and MIG instances) that no process runs on: 0% busy, nothing in memory."""

    def __init__(self, uuids: list[str], model: str = "NVIDIA H100 80GB HBM3"):
        self.uuids, self.model = uuids, model
        self.extra: list[Reading] = []

    def poll(self) -> list[Reading]:
        return [Reading(uuid=uuid, index=index, model=self.model, util_pct=0.0, mem_used_mib=0,
                        mem_total_mib=81559, power_w=70.0, temp_c=30)
                for index, uuid in enumerate(self.uuids)] + list(self.extra)


def agent(server: str, token: str, node: str, spool_dir, collector, source) -> Agent:
    return Agent(collector, Spool(spool_dir), Client(server, token, node, timeout=10),
                 poll_s=5, interval_s=60, holders=Holders(source, every=0))


def poll_hour(agent: Agent, minutes: int = 60, start: datetime = HOUR) -> None:
    """Polls every 5 s over `minutes` from `start`, plus one to close the last interval, then
    sends everything."""
    for step in range(minutes * 12 + 1):
        agent.poll_once(start + timedelta(seconds=5 * step))
    assert agent.drain() == 0.0
    assert agent.spool.pending() == []


def usage_hour(client, slug: str, hour: datetime = HOUR) -> dict:
    """The tenant's usage API row for `hour` (client logged in as an operator)."""
    answer = client.get(f"/api/v1/tenants/{slug}/usage", {
        "start": hour.isoformat(), "end": (hour + timedelta(hours=1)).isoformat(),
        "granularity": "hour"})
    assert answer.status_code == 200, answer.content
    rows = answer.json()["rows"]
    return rows[0] if rows else {"allocated_gpu_hours": 0.0, "samples": 0}
