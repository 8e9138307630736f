"""The dcgm collector: scrape an existing dcgm-exporter /metrics endpoint (Prometheus text).

Kubernetes `namespace`/`pod`/`container` labels, where the exporter adds them, become the
GPU's owner. MIG instances (GPU_I_ID/GPU_I_PROFILE labels) are devices of their own with the
fraction of the parent their profile holds (a 3g slice of 7 is 3/7).
"""

import re
import urllib.error
import urllib.request

from agent.readings import CollectorError, Reading

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
PROFILE = re.compile(r"^(\d+)g\.")
MIG_SLICES = 7
OWNER_LABELS = ("namespace", "pod", "container")


def metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line; comments and malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        match = SAMPLE.match(line.strip())
        if not match:
            continue
        name, labels, raw = match.groups()
        try:
            number = float(raw)
        except ValueError:
            continue
        found = {key: value.replace('\\"', '"').replace("\\\\", "\\")
                 for key, value in LABEL.findall(labels or "")}
        out.append((name, found, number))
    return out


def parse(text: str) -> list[Reading]:
    """One reading per device (GPU or MIG instance) the scrape names by UUID."""
    devices: dict[tuple[str, str | None], dict] = {}
    for name, labels, number in metrics(text):
        uuid = labels.get("UUID")
        if not uuid:
            continue
        key = (uuid, labels.get("GPU_I_ID"))
        device = devices.setdefault(key, {"labels": {}, "values": {}})
        device["labels"].update(labels)
        device["values"][name] = number
    return [_reading(uuid, instance, d["labels"], d["values"])
            for (uuid, instance), d in devices.items()]


def _reading(uuid: str, instance: str | None, labels: dict, values: dict) -> Reading:
    fraction, parent = 1.0, None
    if instance is not None:
        uuid, parent = f"{uuid}/{instance}", uuid
        match = PROFILE.match(labels.get("GPU_I_PROFILE", ""))
        if match:
            fraction = min(1.0, int(match.group(1)) / MIG_SLICES)
    used, free = values.get("DCGM_FI_DEV_FB_USED"), values.get("DCGM_FI_DEV_FB_FREE")
    total = values.get("DCGM_FI_DEV_FB_TOTAL")
    if total is None and used is not None and free is not None:
        total = used + free
    owner = {key: labels[key] for key in OWNER_LABELS if labels.get(key)} or None
    index = labels.get("gpu")
    return Reading(
        uuid=uuid,
        index=int(index) if index and index.isdigit() else None,
        model=labels.get("modelName"),
        util_pct=values.get("DCGM_FI_DEV_GPU_UTIL"),
        mem_used_mib=None if used is None else int(used),
        mem_total_mib=None if total is None else int(total),
        power_w=values.get("DCGM_FI_DEV_POWER_USAGE"),
        temp_c=None if values.get("DCGM_FI_DEV_GPU_TEMP") is None
        else int(values["DCGM_FI_DEV_GPU_TEMP"]),
        fraction=fraction,
        parent=parent,
        owner=owner,
    )


class DcgmCollector:
    def __init__(self, url: str = "http://127.0.0.1:9400/metrics", timeout: float = 5.0):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r}: the dcgm-exporter address must be http:// or https://")
        self.url, self.timeout = url, timeout

    def poll(self) -> list[Reading]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:  # noqa: S310
                return parse(response.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError) as error:
            raise CollectorError(f"dcgm-exporter at {self.url}: {error}") from None
