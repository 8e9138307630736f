"""Who holds each GPU on a Kubernetes node: the kubelet's pod-resources API (gRPC
`v1.PodResourcesLister`, on /var/lib/kubelet/pod-resources/kubelet.sock).

`List` says which devices of which resource each container was assigned; a device assigned to
a container is held by it, whether or not a process runs. `GetAllocatableResources` lists every
device the kubelet knows, which is how a GPU shared by time-slicing shows its replicas
(`<uuid>::<n>`): each becomes a device of its own, 1/replicas of the GPU, held by the container
it was assigned to, so protocol v1 needs no change. MIG instances are named by their MIG UUIDs,
as the NVML collector names them. The NVIDIA device plugin names whole GPUs by UUID, or by
index with DEVICE_ID_STRATEGY=index; both are understood.
"""

import os
from dataclasses import dataclass

import grpc

from agent.holders import KUBELET_SOCKET, HolderError, held_by, marked_unknown
from agent.holders import podresources_pb2 as api
from agent.holders.podresources_pb2_grpc import PodResourcesListerStub
from agent.readings import Reading

TIMEOUT_S = 5.0
REPLICA = "::"


def _ids_of(reading: Reading) -> tuple[str, ...]:
    """The names the device plugin may give this device: its UUID, or a whole GPU's index."""
    if reading.uuid.startswith("MIG-") or reading.index is None:
        return (reading.uuid,)
    return (reading.uuid, str(reading.index))


@dataclass(frozen=True)
class KubeletHoldings:
    owners: dict[str, dict[str, str]]  # device id (a replica's included) -> its container
    replicas: dict[str, tuple[str, ...]]  # device id -> its replicas' ids, when time-sliced

    def apply(self, readings: list[Reading]) -> list[Reading]:
        return self._laid_out(readings, lambda reading, device, **changes: held_by(
            reading, self.owners.get(device), **changes))

    def unknown(self, readings: list[Reading]) -> list[Reading]:
        return self._laid_out(readings, lambda reading, _device, **changes: marked_unknown(
            reading, **changes))

    def _laid_out(self, readings: list[Reading], make) -> list[Reading]:
        out = []
        for reading in readings:
            ids = _ids_of(reading)
            replicas = next((self.replicas[i] for i in ids if i in self.replicas), ())
            if not replicas:
                device = next((i for i in ids if i in self.owners), reading.uuid)
                out.append(make(reading, device))
                continue
            share = reading.fraction / len(replicas)
            for replica in replicas:
                suffix = replica.split(REPLICA, 1)[1]
                out.append(make(reading, replica, uuid=f"{reading.uuid}{REPLICA}{suffix}",
                                fraction=share, parent=reading.parent or reading.uuid))
        return out


class KubeletSource:
    name = "kubelet"

    def __init__(self, socket: str = KUBELET_SOCKET, *, resource_prefix: str = "nvidia.com/"):
        self.socket, self.prefix = socket, resource_prefix
        self._channel: grpc.Channel | None = None

    def _stub(self) -> PodResourcesListerStub:
        if not os.path.exists(self.socket):
            raise HolderError(f"no kubelet pod-resources socket at {self.socket} (mount "
                              "/var/lib/kubelet/pod-resources read-only into the agent)")
        if self._channel is None:
            self._channel = grpc.insecure_channel(f"unix://{self.socket}")
        return PodResourcesListerStub(self._channel)

    def read(self) -> KubeletHoldings:
        stub = self._stub()
        try:
            assigned = stub.List(api.ListPodResourcesRequest(), timeout=TIMEOUT_S)
            known = self._allocatable(stub)
        except grpc.RpcError as error:
            raise HolderError(f"kubelet at {self.socket}: {error.code().name}: "
                              f"{error.details()}") from None
        owners = {}
        for pod in assigned.pod_resources:
            for container in pod.containers:
                owner = {"namespace": pod.namespace, "pod": pod.name,
                         "container": container.name}
                for devices in container.devices:
                    if devices.resource_name.startswith(self.prefix):
                        owners.update(dict.fromkeys(devices.device_ids, owner))
        replicas: dict[str, list[str]] = {}
        for device in sorted(known | set(owners)):
            if REPLICA in device:
                replicas.setdefault(device.split(REPLICA, 1)[0], []).append(device)
        return KubeletHoldings(owners, {gpu: tuple(ids) for gpu, ids in replicas.items()})

    def _allocatable(self, stub: PodResourcesListerStub) -> set[str]:
        """Every device id of the GPU resources; empty where the kubelet predates the call
        (then a GPU's replicas are those assigned to some container)."""
        try:
            answer = stub.GetAllocatableResources(api.AllocatableResourcesRequest(),
                                                  timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                return set()
            raise
        return {device for devices in answer.devices
                if devices.resource_name.startswith(self.prefix)
                for device in devices.device_ids}
