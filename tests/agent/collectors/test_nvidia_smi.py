"""nvidia-smi CSV from real machines (../shared/fixtures/nvidia-smi): exact values."""

import pytest

from agent.collectors.nvidia_smi import NvidiaSmiCollector, combine, parse_apps, parse_gpus, value
from agent.readings import CollectorError, Process, Reading

ZERO_UUID = "GPU-00000000-0000-0000-0000-000000000000"
H100 = "nvidia-smi", "nvidia-h100-80gb-hbm3__590.48.01.{}.query-{}.csv"
L40S = "nvidia-smi", "nvidia-l40s__595.80.{}.query-{}.csv"


def read(fixture_text, machine, state, query):
    folder, pattern = machine
    return fixture_text(folder, pattern.format(state, query))


@pytest.mark.parametrize(("machine", "state", "expected"), [
    (H100, "idle", Reading(uuid=ZERO_UUID, index=0, model="NVIDIA H100 80GB HBM3", util_pct=0.0,
                           mem_used_mib=0, mem_total_mib=81559, power_w=69.85, temp_c=41)),
    (H100, "load", Reading(uuid=ZERO_UUID, index=0, model="NVIDIA H100 80GB HBM3",
                           util_pct=100.0, mem_used_mib=19818, mem_total_mib=81559,
                           power_w=631.95, temp_c=59)),
    (L40S, "idle", Reading(uuid=ZERO_UUID, index=0, model="NVIDIA L40S", util_pct=100.0,
                           mem_used_mib=0, mem_total_mib=46068, power_w=144.97, temp_c=63)),
    (L40S, "load", Reading(uuid=ZERO_UUID, index=0, model="NVIDIA L40S", util_pct=9.0,
                           mem_used_mib=1235, mem_total_mib=46068, power_w=110.23, temp_c=54)),
])
def test_query_gpu_output_parses_to_exact_readings(fixture_text, machine, state, expected):
    assert parse_gpus(read(fixture_text, machine, state, "gpu")) == [expected]


def test_compute_apps_under_load_are_the_gpus_processes(fixture_text):
    apps = parse_apps(read(fixture_text, H100, "load", "compute-apps"))
    assert apps == {ZERO_UUID: [Process(11327, 2566), Process(11328, 1542), Process(11345, 15690)]}
    assert parse_apps(read(fixture_text, H100, "idle", "compute-apps")) == {}


def test_a_gpu_with_processes_is_allocated_and_an_idle_one_is_not(fixture_text):
    busy = combine(parse_gpus(read(fixture_text, L40S, "load", "gpu")),
                   parse_apps(read(fixture_text, L40S, "load", "compute-apps")))
    idle = combine(parse_gpus(read(fixture_text, L40S, "idle", "gpu")),
                   parse_apps(read(fixture_text, L40S, "idle", "compute-apps")))
    assert busy[0].allocated and len(busy[0].processes) == 2
    assert not idle[0].allocated


@pytest.mark.parametrize(("text", "expected"), [
    ("19818 MiB", "19818"), ("100 %", "100"), ("631.95 W", "631.95"), ("[N/A]", None),
    ("[Not Supported]", None), ("[Requested functionality has been deprecated]", None),
    ("N/A", None), ("", None), ("Disabled", "Disabled"),
])
def test_units_and_missing_values_are_read_as_nvidia_smi_writes_them(text, expected):
    assert value(text) == expected


def test_a_missing_binary_is_a_clear_collector_error():
    with pytest.raises(CollectorError, match="no-such-nvidia-smi"):
        NvidiaSmiCollector(binary="no-such-nvidia-smi").poll()


def test_a_failing_binary_reports_its_exit_and_message(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed: no driver' >&2\nexit 9\n")
    fake.chmod(0o755)
    with pytest.raises(CollectorError, match="exited 9: NVIDIA-SMI has failed: no driver"):
        NvidiaSmiCollector(binary=str(fake)).poll()


def test_the_collector_runs_both_queries_and_names_process_owners(tmp_path, fixture_text):
    gpu = tmp_path / "gpu.csv"
    apps = tmp_path / "apps.csv"
    gpu.write_text(read(fixture_text, H100, "load", "gpu"))
    apps.write_text(read(fixture_text, H100, "load", "compute-apps"))
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncase \"$1\" in --query-gpu=*) cat {gpu};; *) cat {apps};; esac\n")
    fake.chmod(0o755)
    [reading] = NvidiaSmiCollector(binary=str(fake), owners=lambda pid: {"user": f"u{pid}"}).poll()
    assert reading.util_pct == 100.0 and reading.allocated
    assert [p.owner for p in reading.processes] == [{"user": "u11327"}, {"user": "u11328"},
                                                   {"user": "u11345"}]
