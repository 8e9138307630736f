"""A stand-in kubelet: the pod-resources API (v1.PodResourcesLister) served on a unix socket from
assignments given in code, for the tests, the agent's benchmark and trying the kubelet source
without a Kubernetes node. It is a real gRPC server speaking the published API, so the agent's
client meets it exactly as it meets a kubelet.
"""

from concurrent import futures
from dataclasses import dataclass, field

import grpc

from agent.holders import podresources_pb2 as api
from agent.holders import podresources_pb2_grpc as rpc


@dataclass
class Assignment:
    """Devices of one resource given to one container of a pod."""

    namespace: str
    pod: str
    container: str
    devices: list[str]
    resource: str = "nvidia.com/gpu"


@dataclass
class Node:
    """What the stand-in kubelet knows: every allocatable device per resource, and the
    assignments. Change them between calls; each call answers what they are then."""

    allocatable: dict[str, list[str]] = field(default_factory=dict)
    assignments: list[Assignment] = field(default_factory=list)
    calls: int = 0


class _Lister(rpc.PodResourcesListerServicer):
    def __init__(self, node: Node):
        self.node = node

    def List(self, request, context):  # noqa: N802 - the API's method name
        self.node.calls += 1
        pods: dict[tuple[str, str], api.PodResources] = {}
        for given in self.node.assignments:
            pod = pods.setdefault((given.namespace, given.pod), api.PodResources(
                name=given.pod, namespace=given.namespace))
            container = next((c for c in pod.containers if c.name == given.container), None)
            if container is None:
                container = pod.containers.add(name=given.container)
            container.devices.add(resource_name=given.resource, device_ids=given.devices)
        return api.ListPodResourcesResponse(pod_resources=list(pods.values()))

    def GetAllocatableResources(self, request, context):  # noqa: N802
        return api.AllocatableResourcesResponse(devices=[
            api.ContainerDevices(resource_name=resource, device_ids=ids)
            for resource, ids in self.node.allocatable.items()])


def serve(socket_path: str, node: Node) -> grpc.Server:
    """Start serving `node` on `socket_path`; stop it with .stop(None)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    rpc.add_PodResourcesListerServicer_to_server(_Lister(node), server)
    server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    return server
