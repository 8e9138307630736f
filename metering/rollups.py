"""The sums behind the hourly rollups, from raw samples. Pure: plain values in and out.

A sample covers [ts, ts + interval_s) and counts in the hours it covers, in proportion: a
3600 s sample at 10:30 is half in the 10:00 hour and half in 11:00 (its sample count goes to
the hour it starts in). A tenant's peak in an hour is the most GPUs it held at one moment of
the hour: the greatest sum of the fractions of its allocated samples that overlap in time,
found by a sweep over their starts and ends, whatever their timestamps (two nodes whose clocks
differ by seconds hold their GPUs at the same time).

PostgreSQL makes the same hourly sums in the database as samples are inserted (migration
metering 0009); this module is the recount, SQLite's ingestion path and the peaks' recount.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)
# A busy time from a fraction or a utilisation this small counts as 0 (PostgreSQL refuses a
# float product that underflows; migration 0009 uses the same bound).
TINY = 1e-150
PEAK_PLACES = 9  # sums of fractions, rounded so that the order of the sweep cannot show

Sample = tuple[int, datetime, int | None, int, bool, float, float | None, bool]
# (gpu_id, ts, tenant_id, interval_s, allocated, fraction, util_pct, holder_unknown): a sample
# whose holder the agent's scheduler could not tell counts as reported by nobody (a gap in the
# device's completeness), whatever it measured.


def floor_hour(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def parts(ts: datetime, interval_s: int) -> list[tuple[datetime, float, bool]]:
    """The hours a sample covers: (hour, seconds of it in that hour, whether it starts
    there). An interval is at most an hour, so at most two parts."""
    hour = floor_hour(ts)
    end = ts + interval_s * SECOND
    if end <= hour + HOUR:
        return [(hour, float(interval_s), True)]
    first = (hour + HOUR - ts).total_seconds()
    return [(hour, first, True), (hour + HOUR, interval_s - first, False)]


@dataclass(slots=True)
class Sums:
    allocated_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    sample_count: int = 0
    peak_gpus: float = 0.0
    reported_s: float = 0.0


def tally(samples: Iterable[Sample]) -> tuple[dict, dict]:
    """Sums per (tenant, hour) and per (GPU, tenant, hour). A GPU-hour's peak is the greatest
    fraction held in it (a device never overlaps itself); a tenant-hour's peak is left at 0
    (it needs every sample of the hour: `peaks`)."""
    by_gpu: dict = {}
    for gpu_id, ts, tenant_id, interval_s, allocated, fraction, util, unknown in samples:
        for hour, seconds, starts in parts(ts, interval_s):
            sums = by_gpu.get((gpu_id, tenant_id, hour))
            if sums is None:
                sums = by_gpu[(gpu_id, tenant_id, hour)] = Sums()
            sums.sample_count += starts
            if not unknown:
                sums.reported_s += seconds
            if allocated:
                allocated_s = seconds * fraction
                sums.allocated_gpu_s += allocated_s
                if util and util >= TINY and fraction >= TINY:
                    sums.busy_gpu_s += allocated_s * util / 100
                if fraction > sums.peak_gpus:
                    sums.peak_gpus = fraction
    by_tenant: dict = defaultdict(Sums)
    for (_gpu_id, tenant_id, hour), sums in by_gpu.items():
        total = by_tenant[(tenant_id, hour)]
        total.allocated_gpu_s += sums.allocated_gpu_s
        total.busy_gpu_s += sums.busy_gpu_s
        total.sample_count += sums.sample_count
        total.reported_s += sums.reported_s
    return dict(by_tenant), by_gpu


def peaks(samples: Iterable[Sample], hours: set[tuple[int | None, datetime]] | None = None
          ) -> dict[tuple[int | None, datetime], float]:
    """The peak of each (tenant, hour) the samples touch (or of `hours` only): the greatest
    sum of fractions of allocated samples covering one moment of the hour."""
    events: dict = defaultdict(list)  # (tenant, hour) -> [(moment, +/- fraction)]
    for _gpu, ts, tenant_id, interval_s, allocated, fraction, _util, _unknown in samples:
        if not allocated:
            continue
        end = ts + interval_s * SECOND
        for hour, _seconds, _starts in parts(ts, interval_s):
            key = (tenant_id, hour)
            if hours is not None and key not in hours:
                continue
            # Clipped to the hour: what a sample held before the hour counts from its start.
            events[key] += [(max(ts, hour), fraction), (min(end, hour + HOUR), -fraction)]
    out = {}
    for key, changes in events.items():
        # Ends before starts at one moment: [a, b) and [b, c) are never held at once.
        changes.sort(key=lambda change: (change[0], change[1] > 0))
        held = best = 0.0
        for _moment, change in changes:
            held += change
            best = max(best, held)
        out[key] = round(best, PEAK_PLACES)
    return out


def recount(samples: list[Sample]) -> tuple[dict, dict]:
    """Complete rollups of raw samples: tally's sums with the tenants' peaks."""
    by_tenant, by_gpu = tally(samples)
    for key, peak in peaks(samples).items():
        by_tenant.setdefault(key, Sums()).peak_gpus = peak
    return by_tenant, by_gpu
