"""A stand-in for pynvml with the real module's exception classes and units: memory in bytes,
power in milliwatts, NotSupported where a GPU lacks a sensor, GpuIsLost for a GPU off the bus."""

from types import SimpleNamespace

import pynvml

MIB = 1024 * 1024


class FakeNvml:
    NVMLError = pynvml.NVMLError
    NVMLError_NotFound = pynvml.NVMLError_NotFound
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

    def __init__(self, gpus: list[dict]):
        self.gpus = gpus
        self.initialised = False

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        self.initialised = True

    def nvmlShutdown(self):  # noqa: N802
        self.initialised = False

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        gpu = self.gpus[index]
        if gpu.get("lost"):
            raise pynvml.NVMLError_GpuIsLost()
        return gpu

    def nvmlDeviceGetName(self, handle):  # noqa: N802
        return handle["name"]

    def nvmlDeviceGetUUID(self, handle):  # noqa: N802
        return handle["uuid"]

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        return SimpleNamespace(used=handle["used_mib"] * MIB, total=handle["total_mib"] * MIB,
                               free=(handle["total_mib"] - handle["used_mib"]) * MIB)

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return SimpleNamespace(gpu=handle["util"], memory=0)

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        if handle.get("power_mw") is None:
            raise pynvml.NVMLError_NotSupported()
        return handle["power_mw"]

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return handle["temp"]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        return [SimpleNamespace(pid=pid, usedGpuMemory=mib * MIB if mib is not None else None)
                for pid, mib in handle.get("processes", [])]

    def nvmlDeviceGetMigMode(self, handle):  # noqa: N802
        if "mig" not in handle:
            raise pynvml.NVMLError_NotSupported()
        return (pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):  # noqa: N802
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, slot):  # noqa: N802
        if slot >= len(handle["mig"]):
            raise pynvml.NVMLError_NotFound()
        return handle["mig"][slot]

    def nvmlDeviceGetAttributes(self, handle):  # noqa: N802
        return SimpleNamespace(gpuInstanceSliceCount=handle["slices"])
