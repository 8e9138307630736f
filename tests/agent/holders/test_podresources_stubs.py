"""The committed gRPC stubs are what the committed .proto compiles to: nobody edited them by
hand, and the .proto was not changed without them."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROTO = "agent/holders/podresources.proto"


def test_the_committed_stubs_are_what_the_proto_compiles_to(tmp_path):
    (tmp_path / "agent" / "holders").mkdir(parents=True)
    shutil.copy(ROOT / PROTO, tmp_path / PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.",
                    "--grpc_python_out=.", PROTO], cwd=tmp_path, check=True, timeout=60)
    for name in ("podresources_pb2.py", "podresources_pb2_grpc.py"):
        made = (tmp_path / "agent" / "holders" / name).read_text()
        assert made == (ROOT / "agent" / "holders" / name).read_text(), name


def test_the_service_is_the_published_one():
    from agent.holders import podresources_pb2 as api

    service = api.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert {m.name for m in service.methods} == {"List", "GetAllocatableResources", "Get"}
    fields = {f.name: f.number for f in api.ContainerDevices.DESCRIPTOR.fields}
    assert fields == {"resource_name": 1, "device_ids": 2, "topology": 3}
    assert {f.name: f.number for f in api.PodResources.DESCRIPTOR.fields} == {
        "name": 1, "namespace": 2, "containers": 3}
