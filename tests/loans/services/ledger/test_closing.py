"""Period close: statements written once, exactly, after the grace; late usage priced as a
correction on the next statement; the job and its command."""

import json
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from loans.models import Statement
from loans.services.ledger.closing import close_due_periods
from loans.tasks import close_periods
from metering.models import Gpu, GpuHour
from tests.story import GPUS, NOW, held, story_hours, util

PERIOD_1_END = NOW.replace(day=30, month=11, hour=16)  # 2026-12-01 00:00 in Asia/Shanghai


def period_1_usage(contract) -> tuple[Decimal, float]:
    period = contract.periods()[0]
    sent = [(g, k) for k, hour in enumerate(story_hours()) for g in range(GPUS)
            if held(g, k) and period.contains(hour)]
    return Decimal(len(sent)), sum(util(g, k) / 100 for g, k in sent)


def post_late(client, node, ts: str, gpu: str = "GPU-0000") -> None:
    body = {"node": node.name, "samples": [
        {"gpu_uuid": gpu, "ts": ts, "interval_s": 3600, "allocated": True, "util_pct": 50.0,
         "owner": {"namespace": "vision"}}]}
    response = client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {node.issue_token()}")
    assert response.json()["accepted"] == 1, response.content


def test_an_ended_period_gets_its_exact_statement(contract, metered):
    run = close_due_periods(NOW)
    assert [s.period_index for s in run.written] == [0]
    statement = Statement.objects.get()
    allocated, busy = period_1_usage(contract)
    assert statement.allocated_gpu_hours == allocated
    assert statement.busy_gpu_hours == pytest.approx(Decimal(repr(busy)), abs=Decimal("1e-6"))
    assert statement.committed_gpu_hours == 1000
    overage = allocated - 1000
    assert statement.overage_gpu_hours == overage and statement.unused_gpu_hours == 0
    assert statement.committed_cost == Decimal("10000.00")
    assert statement.overage_cost == overage * Decimal("12.00")
    assert statement.total_cost == Decimal("10000.00") + overage * 12
    assert statement.completeness == 1
    assert statement.period_start == contract.periods()[0].start


def test_nothing_closes_before_the_grace_has_passed(contract, metered, settings):
    settings.LATE_DATA_GRACE_HOURS = 2
    assert close_due_periods(PERIOD_1_END + timedelta(hours=1, minutes=59)).written == []
    assert len(close_due_periods(PERIOD_1_END + timedelta(hours=2)).written) == 1


def test_closing_twice_writes_one_statement(contract, metered):
    assert len(close_due_periods(NOW).written) == 1
    assert close_due_periods(NOW).written == []
    assert Statement.objects.count() == 1


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_closers_write_one_statement(contract, metered):
    results, barrier = [], threading.Barrier(4)

    def close():
        barrier.wait()
        try:
            results.append(len(close_due_periods(NOW).written))
        finally:
            connection.close()

    threads = [threading.Thread(target=close) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [0, 0, 0, 1]
    assert Statement.objects.count() == 1


def test_a_late_sample_never_rewrites_a_statement_and_is_billed_on_the_next(
        client, lead, contract, metered):
    close_due_periods(NOW)
    first = Statement.objects.get()
    # A GPU that was idle at that hour reports it late: one more GPU-hour for period 1, which
    # was already over its commitment, so it costs the overage rate.
    post_late(client, metered, "2026-11-20T00:00:00Z", gpu="GPU-late")
    first.refresh_from_db()
    assert first.allocated_gpu_hours == period_1_usage(contract)[0]

    client.force_login(lead)
    pending = client.get("/en/tenants/vision/?period=all").context["ledger"].pending
    assert [(e.period.index, c.gpu_hours, c.amount) for e, c in pending] == [
        (0, 1, Decimal("12.00"))]  # shown before the next statement bills it

    with time_machine.travel(contract.periods()[1].end + timedelta(hours=3), tick=False):
        close_due_periods(contract.periods()[1].end + timedelta(hours=3))
    second = Statement.objects.get(period_index=1)
    [line] = second.corrections.all()
    assert (line.period_index, line.gpu_hours, line.amount) == (0, 1, Decimal("12.00"))
    assert line.corrected == first and line.overage_rate == Decimal("12.00")
    assert second.corrections_gpu_hours == 1 and second.corrections_cost == Decimal("12.00")
    assert second.total_cost == second.committed_cost + second.overage_cost + Decimal("12.00")
    assert first.total_cost == Statement.objects.get(period_index=0).total_cost
    # Closed again later, the same late hour is not billed twice.
    third_end = contract.periods()[2].end + timedelta(hours=3)
    close_due_periods(third_end)
    third = Statement.objects.get(period_index=2)
    assert third.corrections_gpu_hours == 0 and not third.corrections.exists()


def test_missing_reports_lower_completeness(contract, metered):
    # GPU 2 reported nothing for a day of the period: 24 of 3 GPUs x 720 hours.
    day = contract.periods()[0].start + timedelta(days=3)
    GpuHour.objects.filter(gpu__index=2, hour__gte=day, hour__lt=day + timedelta(days=1)).delete()
    statement = close_due_periods(NOW).written[0]
    assert statement.completeness == Decimal(1 - 24 / (3 * 720)).quantize(Decimal("0.0001"))


def test_hours_the_meter_heard_nothing_count_as_missing_and_the_statement_says_from_when(
        contract, metered):
    """A tenant whose agents came ten days into the period was stated 100% complete."""
    start = contract.periods()[0].start
    came = start + timedelta(days=10)
    GpuHour.objects.filter(hour__lt=came).delete()
    Gpu.objects.update(first_seen_at=came)
    statement = close_due_periods(NOW).written[0]
    assert statement.completeness == Decimal(20 / 30).quantize(Decimal("0.0001"))
    assert statement.data_from == came


def test_a_node_added_while_the_others_report_is_not_missing_before_it_came(
        client, contract, metered):
    start = contract.periods()[0].start
    came = start + timedelta(days=15)
    body = {"node": metered.name, "samples": [
        {"gpu_uuid": "GPU-0099", "gpu_index": 9, "ts": (came + timedelta(hours=k)).isoformat(),
         "interval_s": 3600, "allocated": False, "util_pct": 0.0}
        for k in range(int((PERIOD_1_END - came).total_seconds() // 3600))]}
    response = client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {metered.issue_token()}")
    assert response.json()["rejected"] == [], response.content
    Gpu.objects.filter(uuid="GPU-0099").update(first_seen_at=came)
    statement = close_due_periods(NOW).written[0]
    assert statement.completeness == 1 and statement.data_from is None


def test_the_job_and_the_command_close_periods(contract, metered, capsys):
    assert close_periods() == "1 statements written over 1 contracts"
    call_command("close_periods", "--now", "2027-01-01T02:00:00+08:00")
    out = capsys.readouterr().out
    assert "vision contract" in out and "period 2" in out
    assert Statement.objects.count() == 2


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01T00:00:00+08:00",
                                   "2026-12-01T00:00:00"])
def test_the_command_refuses_a_bad_moment(value, db):
    with pytest.raises(CommandError, match="--now must be an ISO 8601 moment"):
        call_command("close_periods", "--now", value)
