"""Load: 50 agents (fake collector, 8 GPUs each) post to gunicorn on PostgreSQL while a lead
browses the dashboard. Afterwards the stored samples are exactly what the agents sent, the
rollups equal a recount, and every refused request was a 429 or 503 that its agent retried."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Count, Sum
from django.test import Client as DjangoClient
from prometheus_client.parser import text_string_to_metric_families

from agent.client import Client
from agent.collectors.fake import FakeCollector
from agent.runner import Agent
from agent.spool import Spool
from metering.models import Node, TenantHour, UsageSample
from tests.helpers import assert_rollups_equal_a_recount

pytestmark = pytest.mark.postgresql

AGENTS, GPUS, MINUTES = 50, 8, 12
RATE = 10  # batches a node may post per minute: the last two of each agent get a 429 first
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)


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


def spooled(agent: Agent) -> list[dict]:
    return [sample for path in agent.spool.pending() for sample in agent.spool.load(path)]


def allocated_seconds(samples: list[dict]) -> float:
    return sum(s["interval_s"] * s.get("fraction", 1.0) for s in samples if s["allocated"])


def test_fifty_agents_and_a_browsing_lead_lose_nothing(server, tmp_path, tenant, contract, lead):
    app = server(INGEST_REQUESTS_PER_MINUTE=str(RATE))
    refusals: list[str] = []
    agents = []
    for k in range(AGENTS):
        node = Node.objects.create(name=f"load-{k:02d}", default_tenant=tenant)
        agent = Agent(FakeCollector(GPUS, node=node.name, seed=k), Spool(tmp_path / node.name),
                      CountingClient(app.url, node.issue_token(), node.name, timeout=30,
                                     refusals=refusals), poll_s=5, interval_s=60)
        for step in range(MINUTES * 12 + 1):  # polls every 5 s; one interval a minute
            agent.poll_once(T0 + timedelta(seconds=5 * step))
        agents.append(agent)
    sent = [sample for agent in agents for sample in spooled(agent)]
    assert len(sent) == AGENTS * GPUS * MINUTES

    browser = DjangoClient()
    browser.force_login(lead)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    pages: list[int] = []
    done = threading.Event()

    def browse() -> None:  # a person: a page, a chart's data, a pause (the API allows 600/min)
        while not done.is_set():
            for path in (f"/en/tenants/{tenant.slug}/",
                         f"/api/v1/contracts/{contract.pk}/burndown"):
                pages.append(app.get(path, Cookie=cookie)[0])
            done.wait(0.25)

    def deliver(agent: Agent) -> None:
        deadline = time.monotonic() + 150
        while agent.spool.pending() and time.monotonic() < deadline:
            wait = agent.drain()
            if wait:
                time.sleep(min(wait, 1.0))  # the agent would wait longer; the test need not

    lead_thread = threading.Thread(target=browse)
    lead_thread.start()
    threads = [threading.Thread(target=deliver, args=(agent,)) for agent in agents]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    done.set()
    lead_thread.join()

    assert all(not agent.spool.pending() for agent in agents), "some batches never arrived"
    assert refusals, "the rate limit should have refused some batches"
    assert all(message.startswith(("429", "503")) for message in refusals), set(refusals)
    assert pages and set(pages) == {200}, sorted(set(pages))

    stored = UsageSample.objects.aggregate(n=Count("gpu_id"))["n"]
    assert stored == len(sent)
    rolled = TenantHour.objects.filter(tenant=tenant).aggregate(s=Sum("allocated_gpu_s"))["s"]
    assert rolled == pytest.approx(allocated_seconds(sent), abs=1e-6)
    assert_rollups_equal_a_recount()

    # Every worker's counts reach /metrics (PROMETHEUS_MULTIPROC_DIR), and agree with the agents.
    status, body = app.get("/metrics")
    assert status == 200
    figures = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(body.decode())
               for s in family.samples}
    assert figures[("gpuloans_ingest_samples_total", (("outcome", "accepted"),))] == len(sent)
    throttled = sum(1 for message in refusals if message.startswith("429"))
    assert figures[("gpuloans_ingest_batches_total", (("status", "429"),))] == throttled
    print(f"\n{len(sent)} samples from {AGENTS} agents in {elapsed:.1f} s, "
          f"{len(refusals)} refusals retried, {len(pages)} pages browsed")
