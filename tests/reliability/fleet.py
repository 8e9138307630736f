"""Simulated agents for the reliability tests: the agent's own collector, spool and client,
with the batches spooled up front so that a test knows exactly what was sent."""

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db.models import Count, Sum

from agent.client import Client
from agent.collectors.fake import FakeCollector
from agent.runner import Agent
from agent.spool import Spool
from metering.models import Node, TenantHour, UsageSample
from tests.helpers import assert_rollups_equal_a_recount

T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)


class CountingClient(Client):
    """The agent's own client, noting each answer that did not take the batch."""

    def __init__(self, *args, refusals: list, **kwargs):
        super().__init__(*args, **kwargs)
        self.refusals = refusals

    def send(self, samples, dropped):
        outcome = super().send(samples, dropped)
        if not outcome.done:
            self.refusals.append(outcome.message)
        return outcome


class Fleet:
    def __init__(self, url: str, folder: Path, tenant, *, agents: int, gpus: int, minutes: int,
                 prefix: str = "node"):
        self.refusals: list[str] = []
        self.agents: list[Agent] = []
        for k in range(agents):
            node = Node.objects.create(name=f"{prefix}-{k:02d}", default_tenant=tenant)
            agent = Agent(FakeCollector(gpus, node=node.name, seed=k), Spool(folder / node.name),
                          CountingClient(url, node.issue_token(), node.name, timeout=30,
                                         refusals=self.refusals), poll_s=5, interval_s=60)
            for step in range(minutes * 12 + 1):  # polls every 5 s; one interval a minute
                agent.poll_once(T0 + timedelta(seconds=5 * step))
            self.agents.append(agent)
        self.sent = [s for agent in self.agents for path in agent.spool.pending()
                     for s in agent.spool.load(path)]

    def deliver(self, seconds: float = 150) -> float:
        """Every agent drains its spool from a thread of its own, retrying (faster than a
        real agent would) until nothing is left; returns the seconds it took."""
        def drain(agent: Agent) -> None:
            deadline = time.monotonic() + seconds
            while agent.spool.pending() and time.monotonic() < deadline:
                wait = agent.drain()
                if wait:
                    time.sleep(min(wait, 0.5))

        started = time.monotonic()
        threads = [threading.Thread(target=drain, args=(a,)) for a in self.agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.monotonic() - started

    def assert_exactly_stored(self, tenant) -> None:
        """Everything arrived, once: count, GPU-seconds, and rollups equal to a recount."""
        assert all(not agent.spool.pending() for agent in self.agents), "batches never arrived"
        assert UsageSample.objects.aggregate(n=Count("gpu_id"))["n"] == len(self.sent)
        rolled = TenantHour.objects.filter(tenant=tenant).aggregate(s=Sum("allocated_gpu_s"))["s"]
        expected = sum(s["interval_s"] * s.get("fraction", 1.0) for s in self.sent
                       if s["allocated"])
        assert rolled == pytest.approx(expected, abs=1e-6)
        assert_rollups_equal_a_recount()
