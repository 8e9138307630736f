"""Alerts: each raised once, kept up to date, resolved when its condition clears; notified by
e-mail and by a webhook that is retried until the receiver takes it."""

import ipaddress
import json
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command
from django.db import connection

from config.celery import app
from loans.models import Alert, Amendment, Contract, OveragePolicy, Plan, SharingGroup, Tenant
from loans.services.alerts.conditions import evaluate_alerts
from loans.services.ledger import sharing
from loans.tasks import check_alerts
from metering.models import Gpu, Node
from tests.ledger import attribute, meter, node
from tests.story import NOW


@pytest.fixture
def eager():
    """Celery runs tasks in the caller, retries included, as a worker would (an eager task
    that propagated its errors would raise its first Retry instead of retrying)."""
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def commit(contract: Contract, hours: int) -> None:
    """The commitment of the period running at NOW, as if it had been amended before the
    period began (the service refuses an amendment of a period that has begun)."""
    index = contract.period_at(NOW).index
    before = Contract.objects.get(pk=contract.pk).terms_for(index).committed_gpu_hours
    Amendment.objects.create(contract=contract, from_period=index, reason="test",
                             changes={"committed_gpu_hours": [str(before), f"{hours}.00"]},
                             created_at=NOW)


def open_alerts() -> set[tuple[str, str]]:
    return set(Alert.objects.filter(state="open").values_list("kind", "subject"))


def post(client, node, samples: list[dict]) -> None:
    body = {"node": node.name, "samples": samples}
    response = client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {node.issue_token()}")
    assert response.json()["accepted"] == len(samples), response.content


def test_the_highest_share_of_the_commitment_used_is_the_open_alert(contract, metered):
    commit(contract, 200)  # 115 GPU-h used 2.5 days into period 2: 57%
    evaluate_alerts(NOW)
    subject = f"contract:{contract.pk}:period:2"
    assert (Alert.Kind.COMMITMENT_USED, f"{subject}:50") in open_alerts()
    commit(contract, 140)
    run = evaluate_alerts(NOW)
    assert [a.subject for a in run.opened if a.kind == "commitment_used"] == [f"{subject}:80"]
    assert [a.subject for a in run.resolved if a.kind == "commitment_used"] == [f"{subject}:50"]
    commit(contract, 110)
    evaluate_alerts(NOW)
    assert (Alert.Kind.COMMITMENT_USED, f"{subject}:100") in open_alerts()
    assert Alert.objects.filter(kind="commitment_used", state="open").count() == 1


@pytest.mark.parametrize(("kind", "budget", "says"), [
    ("hold", None, "new jobs wait for the next period; running jobs finish"),
    ("budget", Decimal("5000"), "Jobs now run at the overage rate until 5,000.00 CNY"),
    ("allow", None, "jobs go on at the overage rate"),
])
def test_past_100_percent_the_alert_says_what_the_scheduler_does_now(contract, metered, kind,
                                                                     budget, says):
    OveragePolicy.objects.create(contract=contract, kind=kind, budget=budget, set_at=NOW)
    commit(contract, 110)  # 115 GPU-h used: past 100%
    evaluate_alerts(NOW)
    [alert] = Alert.objects.filter(kind="commitment_used", state="open")
    text = str(alert.message)
    assert "has used 105% of the 110 GPU-h" in text
    assert says in text
    assert alert.details["overage_policy"] == kind


@pytest.mark.parametrize(("kind", "says"), [
    ("hold", "once the commitment is spent, new jobs wait for the next period"),
    ("budget", "Past the commitment, jobs run at the overage rate until 500.00 CNY"),
    ("allow", None),
])
def test_past_80_percent_the_alert_says_what_the_scheduler_will_do(contract, metered, kind,
                                                                   says):
    OveragePolicy.objects.create(contract=contract, kind=kind, set_at=NOW,
                                 budget=Decimal("500") if kind == "budget" else None)
    commit(contract, 130)  # 115 GPU-h used: 88%
    evaluate_alerts(NOW)
    [alert] = Alert.objects.filter(kind="commitment_used", state="open")
    text = str(alert.message)
    assert "has used 88% of the 130 GPU-h" in text
    assert (says in text) if says else "wait" not in text and "overage" not in text


def test_the_overage_budget_alerts_at_80_and_100_percent_spent(contract, metered):
    """115 GPU-h used against 100 committed: 15 GPU-h over at the plan's overage rate."""
    commit(contract, 100)
    rate = contract.terms_at(NOW).overage_rate
    spent = 15 * rate
    OveragePolicy.objects.create(contract=contract, kind="budget", budget=spent * 2,
                                 set_at=NOW)
    evaluate_alerts(NOW)
    assert not Alert.objects.filter(kind="budget_used").exists()  # 50% spent
    subject = f"contract:{contract.pk}:period:2"
    OveragePolicy.objects.create(contract=contract, kind="budget", budget=spent * Decimal("1.1"),
                                 set_at=NOW)
    evaluate_alerts(NOW)
    [alert] = Alert.objects.filter(kind="budget_used", state="open")
    assert alert.subject == f"{subject}:80" and alert.tenant == contract.tenant
    assert "has spent 91% of its overage budget" in str(alert.message)
    assert "Once it is spent, new jobs wait for the next period." in str(alert.message)
    OveragePolicy.objects.create(contract=contract, kind="budget", budget=spent, set_at=NOW)
    run = evaluate_alerts(NOW)
    assert [a.subject for a in run.opened if a.kind == "budget_used"] == [f"{subject}:100"]
    assert [a.subject for a in run.resolved if a.kind == "budget_used"] == [f"{subject}:80"]
    assert "new jobs wait for the next period; running jobs finish" in str(run.opened[-1].message)
    OveragePolicy.objects.create(contract=contract, kind="allow", set_at=NOW)
    run = evaluate_alerts(NOW)  # no budget, nothing to spend
    assert [a.subject for a in run.resolved if a.kind == "budget_used"] == [f"{subject}:100"]


def test_running_twice_opens_nothing_twice(contract, metered):
    commit(contract, 300)
    first = evaluate_alerts(NOW)
    second = evaluate_alerts(NOW)
    assert first.opened and second.opened == [] and second.resolved == []
    assert Alert.objects.count() == len(first.opened)


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_open_each_alert_once(contract, metered):
    commit(contract, 300)
    barrier, errors = threading.Barrier(3), []

    def run():
        barrier.wait()
        try:
            evaluate_alerts(NOW)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    kinds = list(Alert.objects.values_list("kind", "subject"))
    assert len(kinds) == len(set(kinds)) > 0


def test_projected_overage_opens_and_clears_when_the_commitment_covers_it(contract, metered):
    commit(contract, 300)
    evaluate_alerts(NOW)
    alert = Alert.objects.get(kind="projected_overage")
    assert "CNY at the overage rate" in alert.message
    assert float(alert.details["projected_overage_cost"]) > 0
    commit(contract, 5000)
    run = evaluate_alerts(NOW)
    assert alert.pk in [a.pk for a in run.resolved]
    # Now the commitment is far above the forecast: the unused one opens instead.
    assert "projected_unused" in [a.kind for a in run.opened]


def test_a_contract_committing_nothing_is_alerted_of_its_projected_overage(contract, metered):
    """Pay as you go (C = 0) got no alert at all where C = 1 with the same usage got three."""
    commit(contract, 0)
    run = evaluate_alerts(NOW)
    kinds = {a.kind for a in run.opened if a.tenant_id == contract.tenant_id}
    assert "projected_overage" in kinds
    assert not kinds & {"commitment_used", "projected_unused"}  # no commitment to share


def test_gpus_held_idle_for_an_hour_raise_an_alert_with_their_cost(client, contract, metered):
    last_hour = NOW - timedelta(hours=1)
    post(client, metered, [{"gpu_uuid": "GPU-idle", "gpu_index": 7, "ts": last_hour.isoformat(),
                            "interval_s": 3600, "allocated": True, "util_pct": 2.0,
                            "owner": {"namespace": "vision"}}])
    evaluate_alerts(NOW)
    alert = Alert.objects.get(kind="idle_gpus")
    assert alert.details["gpus"] == ["gpu-node-01/7"]
    assert alert.details["cost_per_hour"] == "10.00"  # one GPU-hour at the committed rate
    with time_machine.travel(NOW + timedelta(hours=1), tick=False):
        run = evaluate_alerts(NOW + timedelta(hours=1))
    assert alert.pk in [a.pk for a in run.resolved]


def test_a_silent_node_is_reported_and_cleared_when_it_speaks(client, contract, metered,
                                                              settings):
    settings.NODE_SILENT_AFTER_SECONDS = 180
    later = NOW + timedelta(minutes=4)
    with time_machine.travel(later, tick=False):
        evaluate_alerts(later)
        alert = Alert.objects.get(kind="node_silent")
        assert alert.subject == "node:gpu-node-01" and "4 minutes" in alert.message
        post(client, metered, [{"gpu_uuid": "GPU-0000", "ts": later.isoformat(),
                                "interval_s": 60, "allocated": False}])
        run = evaluate_alerts(later)
    assert alert.pk in [a.pk for a in run.resolved]


def test_a_registered_node_that_never_reports_is_an_alert(client, settings, db):
    """A node registered and then never heard from raised nothing: its agent may not run."""
    settings.NODE_SILENT_AFTER_SECONDS = 180
    with time_machine.travel(NOW, tick=False):
        node = Node.objects.create(name="gpu-node-09", created_at=NOW)
    evaluate_alerts(NOW + timedelta(minutes=2))
    assert not Alert.objects.filter(kind="node_silent").exists()  # just registered
    evaluate_alerts(NOW + timedelta(minutes=10))
    alert = Alert.objects.get(kind="node_silent")
    assert alert.subject == "node:gpu-node-09" and "has never sent a sample" in alert.message
    assert alert.details["registered_at"] == node.created_at.isoformat()


def test_a_gpu_that_went_dark_lowers_completeness_below_99_percent(client, contract, metered):
    period = contract.periods()[1]
    post(client, metered, [{"gpu_uuid": "GPU-dark", "ts": period.start.isoformat(),
                            "interval_s": 3600, "allocated": True,
                            "owner": {"namespace": "vision"}}])
    Gpu.objects.filter(uuid="GPU-dark").update(first_seen_at=period.start)
    evaluate_alerts(NOW)
    alert = Alert.objects.get(kind="incomplete_data")
    assert alert.details["completeness"] < 0.99


class Receiver(BaseHTTPRequestHandler):
    answers: list[int] = []
    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802 - the handler's protocol
        length = int(self.headers["Content-Length"])
        Receiver.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(Receiver.answers.pop(0) if Receiver.answers else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    """A receiver on loopback, which webhooks reach only where the setting allows it."""
    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    Receiver.answers, Receiver.bodies = [503, 500], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_alerts_reach_the_tenant_by_mail_and_by_a_webhook_retried_until_taken(
        contract, metered, tenant, receiver, eager, django_capture_on_commit_callbacks):
    tenant.alert_emails = "lead@example.com, ops@example.com"
    tenant.webhook_url = receiver
    tenant.save()
    commit(contract, 300)
    with django_capture_on_commit_callbacks(execute=True):
        run = evaluate_alerts(NOW)
    assert len(mail.outbox) == len(run.opened)
    assert mail.outbox[0].to == ["lead@example.com", "ops@example.com"]
    # The first delivery met two failures and was retried; every alert arrived.
    assert Receiver.answers == []
    delivered = [b for b in Receiver.bodies if b["event"] == "opened"]
    assert {b["alert"]["id"] for b in delivered} == {a.pk for a in run.opened}
    assert len(Receiver.bodies) == len(run.opened) + 2
    assert delivered[0]["alert"]["tenant"] == "vision"


def test_the_job_and_the_command_check_alerts(contract, metered, capsys):
    commit(contract, 300)
    assert check_alerts().startswith(f"{Alert.objects.count()} opened")
    call_command("check_alerts")
    assert "0 opened, 0 resolved." in capsys.readouterr().out


def test_the_tenant_page_shows_open_alerts_and_their_history(client, lead, contract, metered):
    commit(contract, 200)
    evaluate_alerts(NOW)
    commit(contract, 140)
    evaluate_alerts(NOW)
    client.force_login(lead)
    html = client.get("/en/tenants/vision/").content.decode()
    assert html.count('data-kind="commitment_used"') == 2  # the 80% one open, 50% resolved
    assert "has used" in html


def test_the_fleet_counts_open_alerts(client, operator, contract, metered):
    commit(contract, 300)
    opened = evaluate_alerts(NOW).opened
    client.force_login(operator)
    statuses = client.get("/en/fleet/?sort=alerts").context["page"].object_list
    assert statuses[0].open_alerts == len([a for a in opened if a.tenant_id])


def test_projected_unused_commitment_opens_and_clears_when_the_commitment_is_lowered(
        contract, metered):
    commit(contract, 5000)  # the story burns ~1,400 GPU-h a period
    evaluate_alerts(NOW)
    alert = Alert.objects.get(kind="projected_unused")
    assert float(alert.details["projected_waste"]) > 0
    commit(contract, 1400)
    assert alert.pk in [a.pk for a in evaluate_alerts(NOW).resolved]


def test_a_sharing_group_running_out_and_a_lender_lending_everything_alert_each_team(
        db, settings):
    """Two teams share: vision far over its commitment, speech a little under; at the last
    week's pace the group runs out, and speech's unused hours all go to vision."""
    settings.RAW_RETENTION_DAYS = 3650
    vision, speech = (Tenant.objects.create(slug=s, name=s.title()) for s in ("vision", "speech"))
    plan = Plan.objects.create(name="Small", base_quota_gpus=1, max_quota_gpus=8,
                               committed_gpu_hours=Decimal(300), committed_rate=Decimal(10),
                               term_months=3, currency="CNY")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    group = SharingGroup.objects.create(name="org", currency="CNY")
    for tenant in (vision, speech):
        attribute(tenant)
        contract = Contract(tenant=tenant, plan=plan, starts_on=start.date(), time_zone="UTC",
                            status=Contract.Status.ACTIVE)
        contract.full_clean()
        contract.save()
        sharing.join(group, contract, by=None, now=start - timedelta(days=1))
    meter("vision", start, 240, gpus=2)
    meter("speech", start, 24, gpu_prefix="SP", on=node("gpu-node-02"))
    evaluate_alerts(start + timedelta(days=10))
    kinds = {(a.kind, a.tenant.slug) for a in Alert.objects.filter(state="open")
             if a.kind in ("group_running_out", "all_lent")}
    assert kinds == {("group_running_out", "vision"), ("group_running_out", "speech"),
                     ("all_lent", "speech")}
    [lent] = Alert.objects.filter(kind="all_lent")
    assert "committed GPU-h Speech leaves unused this period will be lent to partners in org" \
        in str(lent.message)
