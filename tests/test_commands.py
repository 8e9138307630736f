"""Management commands, run the way an operator runs them."""

import csv
import io
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from loans.demo import OPERATOR, STORIES
from loans.models import ApiToken, Contract, Membership, Plan, Tenant
from loans.services.ledger import read as ledgers
from loans.services.ledger.closing import close_due_periods
from metering.models import Gpu, GpuHour, Node, TenantHour, UsageSample
from metering.usage import floor_hour, tenant_totals
from tests.helpers import assert_rollups_equal_a_recount


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_node_prints_a_token_that_authenticates_the_node(tenant):
    out, err = run("create_node", "gpu-node-01", "--tenant", "vision")
    token = out.strip()
    node = Node.objects.get(name="gpu-node-01")
    assert Node.objects.by_token(token) == node
    assert node.default_tenant == tenant
    assert token not in (node.token_hash or "")
    assert "shown only now" in err


@pytest.mark.parametrize(("args", "message"), [
    (["bad name!"], "Use 1-63 letters"),
    (["gpu-node-01", "--tenant", "nobody"], "No tenant 'nobody' (known: vision)"),
    (["x" * 64], "Use 1-63 letters"),
])
def test_create_node_refuses_bad_input_with_a_clear_message(tenant, args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run("create_node", *args)
    assert not Node.objects.exists()


def test_create_node_refuses_a_name_already_taken(db):
    run("create_node", "gpu-node-01")
    with pytest.raises(CommandError, match="already exists"):
        run("create_node", "gpu-node-01")


def test_seed_demo_tells_the_four_stories_and_prints_the_logins(db):
    out, _ = run("seed_demo", "--days", "25")
    assert OPERATOR[0] in out and "vision-lead" in out
    assert Tenant.objects.count() == 4
    assert Membership.objects.filter(role="lead").count() == 4
    assert Contract.objects.filter(status="active").count() == 4
    assert Plan.objects.count() >= 4
    now = timezone.now()
    summaries = {
        c.tenant.slug: ledgers.read(c, now).current
        for c in Contract.objects.select_related("tenant")
    }
    # The contracts started with the data, 25 days ago: their first period is the current one.
    for contract in Contract.objects.all():
        assert contract.signed_at < contract.window_start
        assert contract.window_start == UsageSample.objects.order_by("ts").first().ts
        assert ledgers.read(contract, now).current.period.index == 0

    def pace(slug):  # usage per committed hour elapsed in the period
        s = summaries[slug]
        elapsed = (now - s.period.start) / (s.period.end - s.period.start)
        return float(s.used_gpu_hours) / (float(s.committed_gpu_hours) * elapsed)

    assert pace("vision") > 1.0  # heading for overage
    assert pace("nlp") < 0.6  # wasting its commitment
    speech = summaries["speech"]
    assert float(speech.busy_gpu_hours) < 0.1 * float(speech.used_gpu_hours)  # idle GPUs held
    unattributed = tenant_totals(None, now - timedelta(days=25), now)
    assert unattributed.allocated_gpu_hours > 0


def test_seed_demo_sets_its_nodes_registration_back_to_its_history(db, monkeypatch):
    """Intake accepts a node's samples only from its registration; the demo writes its history
    directly, so its nodes are registered when that history begins (they were registered at
    the time of seeding, after every sample the simulated agents would send late)."""
    monkeypatch.undo()  # nodes registered when made, as on a fresh install
    run("seed_demo", "--days", "7")
    first = UsageSample.objects.order_by("ts").values_list("ts", flat=True).first()
    assert Node.objects.exists()
    assert all(node.created_at <= first for node in Node.objects.all())


def test_seed_demo_run_twice_changes_nothing_and_rollups_equal_a_recount(db):
    run("seed_demo", "--days", "7")
    counts = (UsageSample.objects.count(), TenantHour.objects.count(), GpuHour.objects.count(),
              Gpu.objects.count())
    totals = set(TenantHour.objects.values_list("tenant_id", "hour", "allocated_gpu_s"))
    run("seed_demo", "--days", "7")
    assert (UsageSample.objects.count(), TenantHour.objects.count(), GpuHour.objects.count(),
            Gpu.objects.count()) == counts
    assert set(TenantHour.objects.values_list("tenant_id", "hour", "allocated_gpu_s")) == totals
    gpus = sum(len(story.nodes) for story in STORIES) * 8 + 8
    start = Contract.objects.get(tenant__slug="vision").window_start
    hours = (floor_hour(timezone.now()) - start) // timedelta(hours=1)
    assert 7 * 24 <= hours < 8 * 24  # from the first local midnight of the seven days
    assert counts[0] == gpus * hours
    allocated = sum(s.interval_s for s in UsageSample.objects.filter(allocated=True))
    assert sum(h.allocated_gpu_s for h in TenantHour.objects.all()) == allocated


def test_seed_demo_refuses_a_silly_history(db):
    with pytest.raises(CommandError, match="--days must be between 1 and 400"):
        run("seed_demo", "--days", "0")


def test_recount_rollups_rebuilds_a_range_and_reports_progress(db):
    run("seed_demo", "--days", "2")
    TenantHour.objects.all().delete()
    GpuHour.objects.all().delete()
    since = (floor_hour(timezone.now()) - timedelta(days=3)).isoformat()
    out, _ = run("recount_rollups", "--since", since)
    assert "Recounted" in out
    assert TenantHour.objects.exists() and GpuHour.objects.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "yesterday"], "is not a date-time"),
    (["--since", "2026-11-02T00:00", "--until", "2026-11-01T00:00"], "must be after"),
])
def test_recount_rollups_refuses_bad_bounds(db, args, message):
    with pytest.raises(CommandError, match=message):
        run("recount_rollups", *args)


def test_create_api_token_prints_a_token_for_the_user(lead):
    out, err = run("create_api_token", "lead", "--name", "grafana")
    assert "shown only now" in err
    assert ApiToken.objects.get(name="grafana").user == lead
    assert out.strip().startswith("gplu_")
    with pytest.raises(CommandError, match="No user 'nobody'"):
        run("create_api_token", "nobody")


def test_purge_raw_samples_reports_what_it_forgot(db, settings):
    settings.RAW_RETENTION_DAYS = 1
    run("seed_demo", "--days", "3")
    before = UsageSample.objects.count()
    out, _ = run("purge_raw_samples")
    assert "Raw samples before" in out
    assert 0 < UsageSample.objects.count() < before
    assert TenantHour.objects.filter(hour__lt=timezone.now() - timedelta(days=2)).exists()


def test_simulated_agents_post_the_demo_fleet_through_the_protocol(live_server):
    run("seed_demo", "--days", "1")
    before = UsageSample.objects.filter(interval_s=60).count()
    out, err = run("simulate_agents", "--server", live_server.url, "--rounds", "1")
    gpus = (sum(len(story.nodes) for story in STORIES) + 1) * 8
    assert f"posted {gpus} samples: {gpus} accepted, 0 rejected" in out, err
    assert UsageSample.objects.filter(interval_s=60).count() - before == gpus
    assert_rollups_equal_a_recount()


def test_seeding_again_keeps_the_hours_live_agents_reported(db):
    run("seed_demo", "--days", "2")
    gpu = Gpu.objects.order_by("pk").first()
    hour = floor_hour(timezone.now()) - timedelta(hours=5)
    UsageSample.objects.filter(gpu=gpu, ts=hour).delete()
    UsageSample.objects.create(gpu=gpu, ts=hour + timedelta(minutes=7),
                               interval_s=60, allocated=True)
    run("seed_demo", "--days", "2")
    assert not UsageSample.objects.filter(gpu=gpu, ts=hour).exists()


def test_simulate_agents_needs_the_demo_and_a_web_address(db):
    with pytest.raises(CommandError, match="run `python manage.py seed_demo` first"):
        run("simulate_agents", "--rounds", "1")
    with pytest.raises(CommandError, match="must be an http:// or https:// address"):
        run("simulate_agents", "--server", "file:///etc/passwd", "--rounds", "1")


def test_the_demos_vision_borrows_nlps_unused_hours_and_every_view_agrees(db, client):
    """vision and nlp share a group: at the first close nlp's unused hours cover vision's
    overage, and the page, the API, the CSV and FOCUS say the same saving and totals."""
    run("seed_demo", "--days", "40")
    close_due_periods(timezone.now())
    vision, nlp = (Contract.objects.get(tenant__slug=s) for s in ("vision", "nlp"))
    first = vision.statements.get(period_index=0)
    [borrowed] = first.sharing_lines.all()
    assert (borrowed.kind, borrowed.counterpart_id) == ("borrowed", nlp.pk)
    assert first.overage_gpu_hours == 0 and first.sharing_saving > 0
    [lent] = nlp.statements.get(period_index=0).sharing_lines.all()
    assert (lent.gpu_hours, lent.amount) == (borrowed.gpu_hours, borrowed.amount)
    client.force_login(Membership.objects.get(tenant__slug="vision", role="lead").user)
    body = client.get(f"/api/v1/contracts/{vision.pk}/statements").json()
    focus = client.get(f"/api/v1/contracts/{vision.pk}/statements?format=focus")
    page = client.get("/en/tenants/vision/?period=1").content.decode()
    [stated] = [s for s in body["statements"] if s["number"] == 1]
    assert stated["total"] == f"{first.total_cost:.2f}"
    assert stated["sharing"]["saving"] == f"{first.sharing_saving:.2f}"
    assert f'data-saving="{first.sharing_saving}"' in page
    assert f'data-total="{first.total_cost}"' in page
    rows = list(csv.DictReader(io.StringIO(focus.content.decode())))
    assert sum(Decimal(r["BilledCost"]) for r in rows if r["InvoiceId"] == f"{vision.pk}-1") \
        == first.total_cost
    assert any(r["CommitmentDiscountId"] == f"contract-{nlp.pk}" for r in rows)
    # recsys's jobs waited for A100s in its first period (loans.demo.WAITS): below its
    # guarantee of 95%, the statement credits the tier.
    recsys = Contract.objects.get(tenant__slug="recsys").statements.get(period_index=0)
    assert recsys.availability < Decimal("0.95") and recsys.credit < 0
    assert recsys.credit_pct in (10, 25)
    assert recsys.total_cost == (recsys.committed_cost + recsys.overage_cost + recsys.credit)
