from datetime import UTC, datetime, timedelta

import pytest

from agent.aggregate import Aggregator, window_start
from agent.readings import Process, Reading

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def reading(util, *, power=100.0, memory=1000, temp=50, processes=(), uuid="GPU-1", error=None):
    return Reading(uuid=uuid, index=0, model="NVIDIA H100 80GB HBM3", util_pct=util,
                   mem_used_mib=memory, mem_total_mib=81559, power_w=power, temp_c=temp,
                   processes=tuple(processes), error=error)


def test_windows_are_wall_clock_multiples_of_the_interval():
    assert window_start(T0 + timedelta(seconds=59.9), 60) == T0
    assert window_start(T0 + timedelta(seconds=61), 60) == T0 + timedelta(seconds=60)
    assert window_start(T0 + timedelta(minutes=7), 300) == T0 + timedelta(minutes=5)


def test_polls_become_one_sample_per_gpu_per_interval():
    alice = Process(1, 100, {"user": "alice"})
    bob = Process(2, 100, {"user": "bob"})
    aggregator = Aggregator(60)
    polls = [reading(10, power=100, memory=500, temp=40, processes=[alice]),
             reading(30, power=300, memory=900, temp=45, processes=[alice, bob]),
             reading(50, power=200, memory=700, temp=60, processes=[alice])]
    for k, poll in enumerate(polls):
        aggregator.add([poll], T0 + timedelta(seconds=5 * k))
    assert aggregator.completed(T0 + timedelta(seconds=59)) == []
    [sample] = aggregator.completed(T0 + timedelta(seconds=60))
    assert sample == {
        "gpu_uuid": "GPU-1", "gpu_index": 0, "model": "NVIDIA H100 80GB HBM3",
        "mem_total_mib": 81559, "ts": "2026-11-29T10:00:00Z", "interval_s": 60,
        "allocated": True, "fraction": 1.0, "util_pct": 30.0, "mem_used_mib": 900,
        "power_w": 200.0, "temp_c": 60, "owner": {"user": "alice"},
    }
    assert aggregator.completed(T0 + timedelta(hours=1)) == []


def test_a_gpu_no_poll_saw_busy_is_not_allocated_and_errors_are_left_out():
    aggregator = Aggregator(60)
    aggregator.add([reading(0), reading(None, uuid="GPU-2", error="GPU is lost")], T0)
    [sample] = aggregator.completed(T0 + timedelta(minutes=1))
    assert sample["gpu_uuid"] == "GPU-1" and sample["allocated"] is False
    assert sample["owner"] is None


def test_intervals_are_handed_over_oldest_first_and_once():
    aggregator = Aggregator(60)
    for minute in range(3):
        aggregator.add([reading(minute)], T0 + timedelta(minutes=minute, seconds=1))
    done = aggregator.completed(T0 + timedelta(minutes=2))
    assert [s["ts"] for s in done] == ["2026-11-29T10:00:00Z", "2026-11-29T10:01:00Z"]
    assert [s["ts"] for s in aggregator.completed(T0 + timedelta(minutes=3))] == [
        "2026-11-29T10:02:00Z"]


def test_an_interval_outside_the_protocol_is_refused():
    with pytest.raises(ValueError, match="1 to 3600"):
        Aggregator(0)


def test_an_interval_is_split_where_its_holder_changed():
    """A job ended at :20 and another began at :40 on the same GPU: each is billed the time it
    held it, to half a poll (an interval was billed whole to its majority holder, about a GPU-
    minute a job over Slurm's accounting)."""
    a, b = {"account": "a", "job": "1"}, {"account": "b", "job": "2"}
    aggregator = Aggregator(60)
    for second in range(0, 60, 5):
        holder = a if second < 20 else (None if second < 40 else b)
        poll = Reading(uuid="GPU-1", index=0, model="H100", util_pct=50.0 if holder else 0.0,
                       mem_used_mib=1, mem_total_mib=81559, power_w=100.0, temp_c=40,
                       owner=holder)
        aggregator.add([poll], T0 + timedelta(seconds=second))
    parts = aggregator.completed(T0 + timedelta(minutes=1))
    assert [(p["ts"], p["interval_s"], p["owner"], p["allocated"]) for p in parts] == [
        ("2026-11-29T10:00:00Z", 18, a, True),  # polls at 0..15; 17.5 rounds to 18
        ("2026-11-29T10:00:18Z", 20, None, False),  # polls at 20..35; 37.5 rounds to 38
        ("2026-11-29T10:00:38Z", 22, b, True)]
    assert sum(p["interval_s"] for p in parts) == 60  # the parts tile the interval


def test_parts_too_short_for_a_second_join_their_neighbours():
    aggregator = Aggregator(2)
    for k, owner in enumerate([{"user": "a"}, {"user": "b"}, {"user": "a"}, {"user": "b"}]):
        poll = Reading(uuid="GPU-1", index=0, model="H100", util_pct=1.0, mem_used_mib=1,
                       mem_total_mib=81559, power_w=1.0, temp_c=1, owner=owner)
        aggregator.add([poll], T0 + timedelta(seconds=0.4 * k))
    parts = aggregator.completed(T0 + timedelta(seconds=2))
    assert [p["interval_s"] for p in parts] == [1, 1]
    assert all(p["interval_s"] >= 1 for p in parts)


def held(second: float, owner, since_second: float | None = None) -> tuple:
    since = T0 + timedelta(seconds=since_second) if since_second is not None else None
    return (T0 + timedelta(seconds=second),
            Reading(uuid="GPU-1", index=0, model="H100", util_pct=1.0, mem_used_mib=1,
                    mem_total_mib=81559, power_w=1.0, temp_c=1, owner=owner, since=since))


def test_an_interval_is_split_where_the_scheduler_says_the_holder_changed():
    """A job that Slurm started at :07 and ended at :31, polled every 10 s: its part is 7 to
    31, not 5 to 35 (midway between polls)."""
    job = {"account": "a", "job": "1"}
    aggregator = Aggregator(60)
    for at, poll in [held(0, None), held(10, job, 7), held(20, job, 7), held(30, job, 7),
                     held(40, None, 31), held(50, None, 31)]:
        aggregator.add([poll], at)
    parts = aggregator.completed(T0 + timedelta(minutes=1))
    assert [(p["ts"], p["interval_s"], p["owner"]) for p in parts] == [
        ("2026-11-29T10:00:00Z", 7, None), ("2026-11-29T10:00:07Z", 24, job),
        ("2026-11-29T10:00:31Z", 29, None)]


def test_a_moment_the_polls_contradict_is_not_believed():
    """A scheduler moment outside the gap between the two polls (a clock far off) is not used:
    the split falls midway, as without one."""
    job = {"job": "1"}
    aggregator = Aggregator(60)
    for at, poll in [held(0, None), held(10, None), held(20, job, 2), held(50, job, 2)]:
        aggregator.add([poll], at)
    parts = aggregator.completed(T0 + timedelta(minutes=1))
    assert [(p["interval_s"], p["owner"]) for p in parts] == [(15, None), (45, job)]


def test_a_change_the_next_interval_saw_first_splits_the_interval_it_happened_in():
    """A job began at :58; the next poll, at 1:02, is in the next interval: the first
    interval, not yet handed over, ends with the job's two seconds."""
    job = {"job": "1"}
    aggregator = Aggregator(60)
    for at, poll in [held(0, None), held(54, None), held(62, job, 58)]:
        aggregator.add([poll], at)
        done = aggregator.completed(at)
    assert [(p["ts"], p["interval_s"], p["owner"]) for p in done] == [
        ("2026-11-29T10:00:00Z", 58, None), ("2026-11-29T10:00:58Z", 2, job)]
    aggregator.add([held(118, job, 58)[1]], T0 + timedelta(seconds=118))
    [second] = aggregator.completed(T0 + timedelta(minutes=2))
    assert (second["interval_s"], second["owner"]) == (60, job)
    # A moment in an interval already handed over changes nothing
    aggregator.add([held(125, None, 30)[1]], T0 + timedelta(seconds=125))
    assert aggregator.completed(T0 + timedelta(minutes=3))[0]["interval_s"] == 60


def test_a_change_dated_in_the_second_of_the_last_poll_still_splits_the_interval():
    """Slurm's moments are whole seconds: a job that began at :58.6, just after the poll at
    :58.2, is dated :58. The interval still ends with the job's two seconds."""
    job = {"job": "1"}
    aggregator = Aggregator(60)
    aggregator.add([held(0, None)[1]], T0)
    aggregator.add([held(58.2, None)[1]], T0 + timedelta(seconds=58.2))
    aggregator.add([held(63.2, job, 58)[1]], T0 + timedelta(seconds=63.2))
    done = aggregator.completed(T0 + timedelta(seconds=63.2))
    assert [(p["interval_s"], p["owner"]) for p in done] == [(58, None), (2, job)]
