from datetime import UTC, datetime

import pytest

from agent.aggregate import Aggregator
from agent.collectors.nvml import NvmlCollector
from agent.readings import CollectorError, Process, Reading
from tests.agent.fake_pynvml import FakeNvml

H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100", "used_mib": 61234,
        "total_mib": 81559, "util": 87, "power_mw": 612300, "temp": 61,
        "processes": [(4242, 60000)]}


def collector(gpus):
    return NvmlCollector(nvml=FakeNvml(gpus), owners=lambda pid: {"user": f"uid-of-{pid}"})


def test_a_gpu_reads_in_the_protocols_units_with_its_processes_and_owners():
    [reading] = collector([H100]).poll()
    assert reading == Reading(
        uuid="GPU-h100", index=0, model="NVIDIA H100 80GB HBM3", util_pct=87.0,
        mem_used_mib=61234, mem_total_mib=81559, power_w=612.3, temp_c=61,
        processes=(Process(4242, 60000, {"user": "uid-of-4242"}),))
    assert reading.allocated


def test_a_gpu_off_the_bus_is_reported_and_the_others_still_sampled():
    lost = {"lost": True}
    readings = collector([H100, lost, {**H100, "uuid": "GPU-2"}]).poll()
    assert [r.uuid for r in readings] == ["GPU-h100", "index:1", "GPU-2"]
    assert "GPU 1:" in readings[1].error and readings[1].util_pct is None


def test_a_missing_sensor_is_missing_not_an_error():
    [reading] = collector([{**H100, "power_mw": None, "processes": []}]).poll()
    assert reading.power_w is None and reading.error is None and not reading.allocated


def test_mig_instances_are_devices_with_their_fraction():
    gpu = {**H100, "mig": [
        {**H100, "uuid": "MIG-a", "slices": 3, "used_mib": 20000, "total_mib": 40000},
        {**H100, "uuid": "MIG-b", "slices": 1, "processes": []},
    ]}
    readings = collector([gpu]).poll()
    assert [(r.uuid, r.fraction) for r in readings] == [("MIG-a", 3 / 7), ("MIG-b", 1 / 7)]
    assert readings[0].allocated and not readings[1].allocated
    # Each names its physical GPU, so the server counts the GPU once (protocol v1 parent_uuid).
    assert {r.parent for r in readings} == {H100["uuid"]}
    aggregator = Aggregator(60)
    aggregator.add(readings, datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    samples = aggregator.completed(datetime(2026, 11, 29, 10, 1, tzinfo=UTC))
    assert {s["parent_uuid"] for s in samples} == {H100["uuid"]}


def test_without_a_driver_the_collector_says_so_clearly():
    # The real nvidia-ml-py on a machine without an NVIDIA driver (CI and developers' machines).
    with pytest.raises(CollectorError, match="NVML cannot start: .*driver"):
        NvmlCollector()
