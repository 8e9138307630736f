"""Kueue Workloads and pods as the floor's waits (metering.schedulers.waits.Seen): what each
asked for in GPUs, when it was created, when it became eligible, when it was admitted or
scheduled, and why it waits. Pure: the API's JSON in, waits out.

- A Workload (Kueue's v1beta1 and v1beta2 shapes, which agree on these fields): its pod sets'
  GPUs (count x each container's nvidia.com/gpu request, else limit); eligible from its
  creation unless it is inactive (spec.active false); admitted when QuotaReserved turned True;
  waiting for room while QuotaReserved is False for "Pending" (no quota free now), not for
  "Inadmissible" (its queue stopped, as gpuloans' own hold stops it, or missing); ended when
  it finished or is being deleted before it was admitted.
- A pod under a plain ResourceQuota: its containers' GPUs; eligible from its creation unless
  scheduling gates hold it; scheduled when PodScheduled turned True; waiting for room while it
  is Unschedulable.

The GPU type is the node selector's nvidia.com/gpu.product (GPU feature discovery's label),
else "" (untyped). Once admitted or scheduled an object no longer says why it waited: its
reason reads "" and the store keeps the last one read; one first seen already admitted (in
less than a pass: the lister reads every minute) never said it waited for room.
"""

from datetime import UTC, datetime

from metering.schedulers.waits import Seen

GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
WAITING_FOR_ROOM = {"workload": {"Pending"}, "pod": {"Unschedulable"}}


def moment(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _count(value) -> int:
    """A GPU quantity ("2", 2); anything else (a fraction, a suffix) is no whole GPU."""
    try:
        return max(0, int(str(value)))
    except ValueError:
        return 0


def _gpus(spec: dict) -> int:
    total = 0
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = (resources.get("requests") or {}).get(GPU, (resources.get("limits") or {}).get(
            GPU, 0))
        total += _count(asked)
    return total


def _condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind), {})


def _name(meta: dict) -> str:
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def workload(obj: dict) -> Seen | None:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    sets = spec.get("podSets") or []
    gpus = sum(_count(s.get("count", 1)) * _gpus((s.get("template") or {}).get("spec") or {})
               for s in sets)
    created = moment(meta.get("creationTimestamp"))
    if gpus <= 0 or created is None or not meta.get("uid"):
        return None
    reserved, finished = _condition(obj, "QuotaReserved"), _condition(obj, "Finished")
    started = moment(reserved.get("lastTransitionTime")) if reserved.get("status") == "True" \
        else None
    ended = None
    if started is None:
        if finished.get("status") == "True":
            ended = moment(finished.get("lastTransitionTime"))
        elif meta.get("deletionTimestamp"):
            ended = moment(meta["deletionTimestamp"])
    reason = reserved.get("reason", "") if started is None else ""
    selector = ((sets[0].get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return Seen(key=meta["uid"], name=_name(meta), gpus=gpus, submitted=created,
                eligible=created if spec.get("active", True) else None, started=started,
                ended=ended, reason=reason,
                capacity=reason in WAITING_FOR_ROOM["workload"],
                namespace=meta.get("namespace", ""), gpu_type=selector.get(PRODUCT, ""),
                state="admitted" if started else "finished" if ended else "pending",
                qos=spec.get("queueName", ""), message=reserved.get("message", ""))


def pod(obj: dict) -> Seen | None:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    gpus = _gpus(spec)
    created = moment(meta.get("creationTimestamp"))
    if gpus <= 0 or created is None or not meta.get("uid"):
        return None
    scheduled = _condition(obj, "PodScheduled")
    started = moment(scheduled.get("lastTransitionTime")) \
        if scheduled.get("status") == "True" else None
    ended = moment(meta.get("deletionTimestamp")) if started is None else None
    reason = scheduled.get("reason", "") if started is None else ""
    gated = bool(spec.get("schedulingGates"))
    return Seen(key=meta["uid"], name=_name(meta), gpus=gpus, submitted=created,
                eligible=None if gated else created, started=started, ended=ended,
                reason=reason,
                capacity=reason in WAITING_FOR_ROOM["pod"],
                namespace=meta.get("namespace", ""),
                gpu_type=(spec.get("nodeSelector") or {}).get(PRODUCT, ""),
                state=(obj.get("status") or {}).get("phase", ""),
                message=scheduled.get("message", ""))
