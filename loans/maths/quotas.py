"""Quotas from hourly concurrent GPUs: the base quota that leaves a stated share of the hours
ahead needing a burst, a cap that usage sits at, consolidation of idle held GPUs, and the seeds'
scale rule. Pure: plain lists in, plain results out."""

import math
from dataclasses import dataclass

import numpy as np

from loans.maths.recommend import quantile


@dataclass(frozen=True)
class QuotaAdvice:
    kind: str  # "base_quota", "max_quota", "consolidate"
    current: int | None
    recommended: int | None
    evidence: dict


SCALE_UP_BUSY = 0.8  # busy share of held GPU time above which a pressed team scales up
SCALE_DOWN_BUSY = 0.3  # below it, consolidate
LOWER_BELOW = 0.7  # a base quota is advised lower only when its demand stays under 70% of it


def base_for_bursts(peaks: list[float], growth: list[float], share: float) -> int:
    """The smallest whole base quota above which concurrent demand goes in at most `share`
    of the hours ahead: the hourly peaks of the lookback, scaled by each coming period's
    growth (the term model's usage against today's), pooled over the periods."""
    pooled = np.sort(np.multiply.outer(np.asarray(growth, dtype=float),
                                       np.asarray(peaks, dtype=float)), axis=None)
    allowed = math.floor(share * len(pooled) + 1e-9)  # hours that may need a burst
    if allowed >= len(pooled):
        return 0
    return max(0, math.ceil(float(pooled[len(pooled) - allowed - 1]) - 1e-9))


def share_above(peaks: list[float], growth: list[float], base: float) -> float:
    """The share of the hours ahead (as base_for_bursts reads them) whose demand exceeds
    `base`: each of them needs a burst."""
    demand = np.multiply.outer(np.asarray(growth, dtype=float), np.asarray(peaks, dtype=float))
    return int(np.count_nonzero(demand > base + 1e-9)) / (len(peaks) * len(growth))


def advise_quotas(peaks: list[float], allocated: list[float], busy: list[float], *,
                  base: int, cap: int, pressed: int = 0, pressed_gpus: int = 0,
                  growth: list[float] | None = None,
                  burst_share: float = 0.05) -> list[QuotaAdvice]:
    """From hourly peak concurrent GPUs and GPU-hours held and busy over the lookback:
    the base quota that leaves at most `burst_share` of the hours ahead needing a burst
    (base_for_bursts, the peaks grown by `growth`, each coming period's usage against
    today's, from the term model; [1.0] where there is none), advised up whenever the current
    one leaves more, and down when it stays under 70% of the current one; raise the cap when
    usage sits at the cap in more than 5% of hours; flag consolidation when under 30% of held
    time is busy.

    The sources' scale rule: when over 80% of the held GPU time is busy and `pressed` burst
    requests waited in the queue or were refused, the base quota grows by the most GPUs one
    of them asked for (`pressed_gpus`), or to the demand's base if that is more (never past
    the cap), and is never advised lower."""
    out: list[QuotaAdvice] = []
    held_hours = [p for p in peaks if p > 0]
    if not peaks or not held_hours:
        return out
    growth = growth or [1.0]
    p95 = quantile(peaks, 0.95)
    needed = base_for_bursts(peaks, growth, burst_share)
    evidence = {"p95_concurrent_gpus": round(p95, 2), "hours": len(peaks),
                "peak_concurrent_gpus": round(max(peaks), 2),
                "burst_share_allowed": burst_share, "periods_ahead": len(growth),
                "growth": [round(g, 3) for g in growth],
                "burst_share_now": round(share_above(peaks, growth, base), 4),
                "burst_share_advised": round(share_above(peaks, growth, needed), 4)}
    held, worked = sum(allocated), sum(busy)
    busy_share = worked / held if held > 0 else 0.0
    wanted = min(cap, max(base + pressed_gpus, needed))  # never past the cap
    if busy_share > SCALE_UP_BUSY and pressed > 0:
        if wanted > base:
            out.append(QuotaAdvice("base_quota", base, wanted, {
                **evidence, "burst_share_advised": round(share_above(peaks, growth, wanted), 4),
                "busy_share": round(busy_share, 4), "bursts_pressed": pressed,
                "scale_up": True}))
    elif needed > base or needed < LOWER_BELOW * base:
        out.append(QuotaAdvice("base_quota", base, needed, evidence))
    at_cap = sum(1 for p in peaks if p >= cap - 1e-9) / len(peaks)
    if cap > 0 and at_cap > 0.05:
        out.append(QuotaAdvice("max_quota", cap, math.ceil(cap * 1.25),
                               {**evidence, "share_of_hours_at_cap": round(at_cap, 4)}))
    if held > 0 and busy_share < SCALE_DOWN_BUSY:
        out.append(QuotaAdvice("consolidate", None, None, {
            "busy_share": round(worked / held, 4), "allocated_gpu_hours": round(held, 1),
            "idle_gpu_hours": round(held - worked, 1)}))
    return out
