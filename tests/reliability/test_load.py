"""Load: 50 agents (fake collector, 8 GPUs each) post to gunicorn on PostgreSQL while a lead
browses the dashboard. Afterwards the stored samples are exactly what the agents sent, the
rollups equal a recount, and every refused request was a 429 or 503 that its agent retried."""

import threading
import time

import pytest
from django.test import Client as DjangoClient
from prometheus_client.parser import text_string_to_metric_families

from tests.reliability.fleet import Fleet

pytestmark = pytest.mark.postgresql

AGENTS, GPUS, MINUTES = 50, 8, 12
RATE = 10  # batches a node may post per minute: the last two of each agent get a 429 first


def test_fifty_agents_and_a_browsing_lead_lose_nothing(server, tmp_path, tenant, contract, lead):
    app = server(INGEST_REQUESTS_PER_MINUTE=str(RATE))
    fleet = Fleet(app.url, tmp_path, tenant, agents=AGENTS, gpus=GPUS, minutes=MINUTES,
                  prefix="load")
    assert len(fleet.sent) == AGENTS * GPUS * MINUTES

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

    # The rate counts in fixed one-minute windows (metering.intake.api): start early in one, so that
    # each agent's batches reach it in the same window; a window turning over while they went
    # gave none of them a 429 (it happened once in CI).
    left = 60 - time.time() % 60
    if left < 20:
        time.sleep(left + 0.5)
    lead_thread = threading.Thread(target=browse)
    lead_thread.start()
    try:
        elapsed = fleet.deliver()
    finally:
        done.set()
        lead_thread.join()

    fleet.assert_exactly_stored(tenant)
    assert fleet.refusals, "the rate limit should have refused some batches"
    assert all(m.startswith(("429", "503")) for m in fleet.refusals), set(fleet.refusals)
    assert pages and set(pages) == {200}, sorted(set(pages))

    # Every worker's counts reach /metrics (PROMETHEUS_MULTIPROC_DIR), and agree with the agents.
    status, body = app.get("/metrics")
    assert status == 200
    figures = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(body.decode())
               for s in family.samples}
    assert figures[("gpuloans_ingest_samples_total", (("outcome", "accepted"),))] == \
        len(fleet.sent)
    throttled = sum(1 for message in fleet.refusals if message.startswith("429"))
    assert figures[("gpuloans_ingest_batches_total", (("status", "429"),))] == throttled
    print(f"\n{len(fleet.sent)} samples from {AGENTS} agents in {elapsed:.1f} s, "
          f"{len(fleet.refusals)} refusals retried, {len(pages)} pages browsed")
