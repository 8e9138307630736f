"""A dcgm-exporter scrape (../shared/fixtures/dcgm-exporter): exact values, pod labels."""

from agent.collectors.dcgm import DcgmCollector, metrics, parse
from agent.readings import CollectorError, Reading

T4 = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"


def by_uuid(readings):
    return {reading.uuid: reading for reading in readings}


def test_the_t4_reads_exactly_what_the_exporter_said(fixture_text):
    t4 = by_uuid(parse(fixture_text("dcgm-exporter", "t4-a10g-metrics.txt")))[T4]
    assert t4 == Reading(uuid=T4, index=0, model="Tesla T4", util_pct=0.0, mem_used_mib=0,
                         mem_total_mib=15109, power_w=8.969, temp_c=25)
    assert not t4.allocated


def test_pod_labels_make_the_owner_and_the_gpu_allocated(fixture_text):
    a10g = by_uuid(parse(fixture_text("dcgm-exporter", "t4-a10g-metrics.txt")))["GPU-abc"]
    assert a10g.model == "NVIDIA A10G"
    assert a10g.owner == {"namespace": "ray-llm", "pod": "ray-1111111", "container": "ray-worker"}
    assert a10g.allocated


def test_lines_without_a_uuid_and_comments_are_not_devices(fixture_text):
    readings = parse(fixture_text("dcgm-exporter", "t4-a10g-metrics.txt"))
    assert sorted(r.uuid for r in readings) == sorted(
        [T4, "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5", "GPU-abc"])


def test_mig_instances_are_devices_with_their_share_of_the_gpu():
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",GPU_I_ID="1",GPU_I_PROFILE="3g.40gb",'
        'modelName="NVIDIA A100-SXM4-80GB"} 55\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",GPU_I_ID="2",GPU_I_PROFILE="1g.10gb"} 7\n'
    )
    readings = by_uuid(parse(text))
    assert readings["GPU-1/1"].fraction == 3 / 7 and readings["GPU-1/1"].util_pct == 55
    assert readings["GPU-1/2"].fraction == 1 / 7
    assert readings["GPU-1/1"].parent == readings["GPU-1/2"].parent == "GPU-1"


def test_escaped_label_values_and_timestamps_parse():
    [(name, labels, number)] = metrics('M{UUID="G",pod="a\\"b"} 1.5 1700000000000\n')
    assert (name, labels, number) == ("M", {"UUID": "G", "pod": 'a"b'}, 1.5)


def test_an_unreachable_exporter_is_a_clear_collector_error():
    collector = DcgmCollector(url="http://127.0.0.1:9/metrics", timeout=1)
    try:
        collector.poll()
    except CollectorError as error:
        assert "dcgm-exporter at http://127.0.0.1:9/metrics" in str(error)
    else:
        raise AssertionError("an unreachable exporter must raise CollectorError")
