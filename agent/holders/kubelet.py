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

import logging
import os
from dataclasses import dataclass

import grpc

from agent.holders import podresources_pb2 as api
from agent.holders.podresources_pb2_grpc import PodResourcesListerStub
from agent.holders.protocol import KUBELET_SOCKET, HolderError, held_by, marked_unknown
from agent.readings import Reading

TIMEOUT_S = 5.0
REPLICA = "::"
# After a kubelet restart gRPC waits out its reconnect backoff (up to 2 minutes) before it
# dials again, and by default shares its subchannels process-wide, so a new channel inherits
# the wait: a poll every 15 s would find the kubelet back only 20 to 55 s after it is. A short
# backoff and a channel-local pool answer at the next poll; an unavailable channel is also
# dropped, so the next read dials afresh.
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000),
                   ("grpc.use_local_subchannel_pool", 1)]
log = logging.getLogger("gpuloans-agent")


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
    least_every = 0.0

    def __init__(self, socket: str = KUBELET_SOCKET, *, resource_prefix: str = "nvidia.com/"):
        self.socket, self.prefix = socket, resource_prefix
        self._channel: grpc.Channel | None = None
        self._conflicts: set[tuple] = set()  # devices listed for several containers, logged

    def _stub(self) -> PodResourcesListerStub:
        if not os.path.exists(self.socket):
            raise HolderError(f"no kubelet pod-resources socket at {self.socket} (mount "
                              "/var/lib/kubelet/pod-resources read-only into the agent)")
        if self._channel is None:
            self._channel = grpc.insecure_channel(f"unix://{self.socket}",
                                                  options=CHANNEL_OPTIONS)
        return PodResourcesListerStub(self._channel)

    def _drop_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def read(self) -> KubeletHoldings:
        stub = self._stub()
        try:
            assigned = stub.List(api.ListPodResourcesRequest(), timeout=TIMEOUT_S)
            known = self._allocatable(stub)
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                self._drop_channel()  # a restarted kubelet: dial afresh next time
            raise HolderError(f"kubelet at {self.socket}: {error.code().name}: "
                              f"{error.details()}") from None
        listed: dict[str, list[dict[str, str]]] = {}
        for pod in assigned.pod_resources:
            for container in pod.containers:
                owner = {"namespace": pod.namespace, "pod": pod.name,
                         "container": container.name}
                for devices in container.devices:
                    if devices.resource_name.startswith(self.prefix):
                        for device in devices.device_ids:
                            listed.setdefault(device, []).append(owner)
        owners = {device: self._one_of(device, holders) for device, holders in listed.items()}
        replicas: dict[str, list[str]] = {}
        for device in sorted(known | set(owners)):
            if REPLICA in device:
                replicas.setdefault(device.split(REPLICA, 1)[0], []).append(device)
        return KubeletHoldings(owners, {gpu: tuple(ids) for gpu, ids in replicas.items()})

    def _one_of(self, device: str, holders: list[dict[str, str]]) -> dict[str, str]:
        """The container a device is billed to when the kubelet lists it for several (which
        it should not, and in no promised order): the first by namespace, pod and container,
        so the same one every poll; the conflict is logged once while it lasts."""
        chosen = min(holders, key=lambda o: (o["namespace"], o["pod"], o["container"]))
        if len(holders) > 1:
            key = (device, tuple(sorted(tuple(o.values()) for o in holders)))
            if key not in self._conflicts:
                self._conflicts.add(key)
                log.warning("the kubelet lists %s for %d containers (%s); billed to %s/%s/%s, "
                            "the first by namespace, pod and container", device, len(holders),
                            ", ".join("/".join(o.values()) for o in holders),
                            chosen["namespace"], chosen["pod"], chosen["container"])
        return chosen

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
