"""The NVML collector (nvidia-ml-py, imported as pynvml): every GPU, MIG instances as devices of
their own, running compute processes with their owners. A GPU that cannot be read (fallen off
the bus) is reported with its error while the others are still sampled."""

from collections.abc import Callable
from pathlib import Path

from agent.owners import owner_of
from agent.readings import CollectorError, Process, Reading

MIB = 1024 * 1024
MIG_SLICES = 7


class NvmlCollector:
    def __init__(self, nvml=None, owners: Callable[[int], dict | None] | None = None):
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError:
                raise CollectorError(
                    "nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
        self.nvml = nvml
        self.owners = owners or (lambda pid: owner_of(pid, Path("/proc")))
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            raise CollectorError(f"NVML cannot start: {error} (is the NVIDIA driver loaded?)"
                                 ) from None

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def poll(self) -> list[Reading]:
        nvml = self.nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as error:
            raise CollectorError(f"NVML cannot count GPUs: {error}") from None
        readings = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                readings.extend(self._device(handle, index))
            except nvml.NVMLError as error:
                readings.append(Reading(uuid=f"index:{index}", index=index,
                                        error=f"GPU {index}: {error}"))
        return readings

    def _device(self, handle, index: int) -> list[Reading]:
        nvml = self.nvml
        instances = self._mig_instances(handle)
        if instances:
            name, parent = nvml.nvmlDeviceGetName(handle), nvml.nvmlDeviceGetUUID(handle)
            return [self._read(mig, index, name, fraction, parent)
                    for mig, fraction in instances]
        return [self._read(handle, index, nvml.nvmlDeviceGetName(handle), 1.0)]

    def _mig_instances(self, handle) -> list[tuple[object, float]]:
        nvml = self.nvml
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError:  # not a MIG-capable GPU
            return []
        if current != nvml.NVML_DEVICE_MIG_ENABLE:
            return []
        found = []
        for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError_NotFound:
                continue
            slices = nvml.nvmlDeviceGetAttributes(mig).gpuInstanceSliceCount
            found.append((mig, min(1.0, slices / MIG_SLICES)))
        return found

    def _optional(self, read: Callable, *args):
        try:
            return read(*args)
        except self.nvml.NVMLError_NotSupported:
            return None

    def _read(self, handle, index: int, name: str, fraction: float,
              parent: str | None = None) -> Reading:
        nvml = self.nvml
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        utilisation = self._optional(nvml.nvmlDeviceGetUtilizationRates, handle)
        power = self._optional(nvml.nvmlDeviceGetPowerUsage, handle)
        temperature = self._optional(nvml.nvmlDeviceGetTemperature, handle,
                                     nvml.NVML_TEMPERATURE_GPU)
        processes = tuple(
            Process(pid=p.pid, used_mib=None if p.usedGpuMemory is None
                    else p.usedGpuMemory // MIB, owner=self.owners(p.pid))
            for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        )
        return Reading(
            uuid=nvml.nvmlDeviceGetUUID(handle), index=index, model=name,
            util_pct=None if utilisation is None else float(utilisation.gpu),
            mem_used_mib=memory.used // MIB, mem_total_mib=memory.total // MIB,
            power_w=None if power is None else power / 1000, temp_c=temperature,
            fraction=fraction, parent=parent, processes=processes,
        )
