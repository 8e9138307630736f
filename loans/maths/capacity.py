"""Capacity sums: how many GPUs spans of time hold at their peak (a contract period's base
quota, a granted burst), over a window or hour by hour. Pure arithmetic on (start, end, GPUs);
loans.services.bursts reads the spans and decides."""

from datetime import datetime, timedelta

HOUR = timedelta(hours=1)

Guarantee = tuple[datetime, datetime, int]  # a period of a contract, its base quota


def guaranteed_gpus(owed: list[Guarantee], start: datetime, end: datetime) -> int:
    """The most GPUs these guarantees hold at one moment of [start, end)."""
    return peak([(max(first, start), min(last, end), base) for first, last, base in owed
                 if first < end and last > start])


def guaranteed_by_hour(owed: list[Guarantee], hours: list[datetime]) -> list[int]:
    """guaranteed_gpus over each of consecutive hours, in one sweep over the guarantees'
    edges: a pool's week is 168 hours of a thousand contracts' periods."""
    edges = sorted(edge for first, last, base in owed for edge in ((first, base), (last, -base)))
    out, held, next_edge = [], 0, 0
    for hour in hours:
        while next_edge < len(edges) and edges[next_edge][0] <= hour:
            held += edges[next_edge][1]
            next_edge += 1
        top = running = held
        inside = next_edge
        while inside < len(edges) and edges[inside][0] < hour + HOUR:
            running += edges[inside][1]
            top = max(top, running)
            inside += 1
        out.append(top)
    return out


def peak(spans: list[tuple[datetime, datetime, int]]) -> int:
    """The most held at one moment by spans (start, end, GPUs); ends before starts."""
    edges = [edge for start, end, gpus in spans for edge in ((start, gpus), (end, -gpus))]
    top = held = 0
    for _moment, change in sorted(edges, key=lambda e: (e[0], e[1])):
        held += change
        top = max(top, held)
    return top
