"""The burn-down forecast, replayed on GPU usage it has never seen, as a lead would read it.

    .venv/bin/python bench/forecast.py [--period-days 30] [--seeds 3]

At every midnight from day 3 of a period to its last day, the product's own burn-down
(loans.maths.burndown.burndown) is asked, with only the hours before that midnight, how many
GPU-hours the period will end with; the answer is compared with what the period did use. A
period starts at every midnight of a trace that leaves a whole period after a week of history,
so the periods of one trace overlap (they share days): each is a different "now" of a lead, not
an independent sample. Per horizon (16-29, 8-15 and at most 7 days left) it prints the share
of period ends inside the P10-P90 band (target 70-90%) and inside P25-P75 (for a calibrated
band about 50%), and the mean absolute error of the point forecast as a share of the period's
use, for the product's forecaster and, beside it, for the band it replaced (1.2816 x the
standard deviation of the trailing week's daily sums x the square root of the days left: days
taken as independent) and for a candidate point forecast, an exponentially weighted daily rate
(half-life 3 days).

Traces, and their shapes:
  philly     Microsoft's Philly cluster, 2017-10-03 to 12-15 (bench/data/, cited there): one
             series, 73 days, level shifts and a weekly rhythm; about 37 periods of 30 days
  demo-*     the demo's four teams (loans.demo): a working-day rhythm, noise, three-day
             training bursts (vision, nlp), flat inference (speech), a small steady team
  iid        independent days around a fixed level
  walk       a level that walks at random, with daily noise
  trend      a straight trend, rising or falling, with noise
Synthetic and demo traces are 150 days, `--seeds` of each.
No database: the generators and the forecaster are plain functions.
"""

import argparse
import csv
import math
import os
import random
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")  # no server and no secrets: development settings
django.setup()  # the demo generator lives beside the demo's models; no database is touched

from loans.demo import STORIES, gpus_held, is_bursting  # noqa: E402
from loans.maths import forecast  # noqa: E402
from loans.maths.burndown import burndown  # noqa: E402

DAY = timedelta(days=1)
START = datetime(2026, 1, 5, tzinfo=UTC)  # synthetic traces start on a Monday
BUCKETS = (("16-29", 16), ("8-15", 8), ("<=7", 0))
Z50 = 0.6744897501960817  # the standard normal's 0.75 quantile: P25/P75
HALF_LIFE_DAYS = 3.0


def philly() -> dict[datetime, float]:
    """GPU-hours in use each hour (the trace's hours, taken as UTC), whole days only."""
    hours: dict[datetime, float] = {}
    with open(ROOT / "bench" / "data" / "philly-cluster-hourly.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            hours[datetime.fromisoformat(row["hour"]).replace(tzinfo=UTC)] = float(
                row["active_gpus_mean"])
    days = {}
    for hour in hours:
        days.setdefault(hour.replace(hour=0), []).append(hour)
    return {h: hours[h] for day, members in days.items() if len(members) == 24 for h in members}


def demo(index: int, seed: int, days: int = 150) -> dict[datetime, float]:
    story, rng = STORIES[index], random.Random(seed)
    out = {}
    for k in range(days * 24):
        hour = START + timedelta(hours=k)
        out[hour] = float(gpus_held(story, hour, rng, is_bursting(story, hour.date())))
    return out


def synthetic(shape: str, seed: int, days: int = 150) -> dict[datetime, float]:
    """Daily levels of `shape`, spread over each day's hours (GPU-hours an hour)."""
    rng = random.Random(f"{shape}-{seed}")
    level, slope = 100.0, rng.uniform(-0.4, 0.8)
    out = {}
    for day in range(days):
        if shape == "iid":
            value = rng.gauss(100, 25)
        elif shape == "walk":
            level = max(5.0, level + rng.gauss(0, 3))
            value = level + rng.gauss(0, 10)
        else:
            value = 100 + slope * day + rng.gauss(0, 15)
        for hour in range(24):
            out[START + day * DAY + timedelta(hours=hour)] = max(0.0, value) / 24
    return out


def replaced_band(usage, now: datetime, hours_left: float) -> float:
    """The half-width the product showed before: days taken as independent."""
    days = forecast.daily_totals(usage, now, now - 7 * DAY)
    sd = statistics.stdev(days) if len(days) >= 2 else 0.0
    return forecast.Z90 * sd * math.sqrt(hours_left / 24)


def weighted_rate(usage, now: datetime, first: datetime) -> float:
    days = forecast.daily_totals(usage, now, first)
    weights = [0.5 ** ((len(days) - 1 - k) / HALF_LIFE_DAYS) for k in range(len(days))]
    return (sum(w * d for w, d in zip(weights, days, strict=True)) / sum(weights) / 24
            if days else 0.0)


def replay(usage: dict[datetime, float], period_days: int) -> dict[str, dict[str, list]]:
    """Each bucket's outcomes: (inside P10-P90 now, inside before, inside P25-P75, error now,
    error of the weighted rate), errors as shares of the period's use."""
    first, last = min(usage), max(usage) + timedelta(hours=1)
    found = {name: [] for name, _least in BUCKETS}
    start = first + 7 * DAY
    while start + period_days * DAY <= last:
        end = start + period_days * DAY
        total = sum(v for h, v in usage.items() if start <= h < end)
        for day in range(3, period_days):
            now = start + day * DAY
            seen = {h: v for h, v in usage.items() if h < now}
            curve = burndown(start=start, end=end, committed=0.0, usage=seen, now=now,
                             history_start=first)
            used, hours_left = curve.used, (end - now).total_seconds() / 3600
            low, high = -curve.forecast_p90[-1], -curve.forecast_p10[-1]
            point = curve.projected_used
            quarter = Z50 * curve.spread.relative_sd(hours_left / 24) * curve.rate_per_hour * 24
            expected = curve.rate_per_hour * hours_left
            old = replaced_band(seen, now, hours_left)
            weighted = used + weighted_rate(seen, now, first) * hours_left
            bucket = next(name for name, least in BUCKETS if period_days - day >= least)
            scale = total or 1.0
            found[bucket].append((
                low <= total <= high,
                used + max(0.0, expected - old) <= total <= used + expected + old,
                used + max(0.0, expected - quarter) <= total <= used + expected + quarter,
                abs(point - total) / scale, abs(weighted - total) / scale))
        start += DAY
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--period-days", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    traces = [("philly", [philly()])]
    traces += [(f"demo-{story.slug}", [demo(k, seed) for seed in range(args.seeds)])
               for k, story in enumerate(STORIES)]
    traces += [(shape, [synthetic(shape, seed) for seed in range(args.seeds)])
               for shape in ("iid", "walk", "trend")]
    print(f"{args.period_days}-day periods from every midnight; forecasts at every midnight "
          "from day 3. Inside P10-P90 (target 70-90%), inside P25-P75 (about 50%), mean "
          "absolute error of the point forecast, as a share of the period's use; 'before' is "
          "the band it replaced, 'EW' an exponentially weighted rate.", flush=True)
    pooled = {name: [] for name, _least in BUCKETS}
    print(f"{'trace':<14}{'days left':>10}{'n':>6}{'P10-P90':>9}{'before':>8}{'P25-P75':>9}"
          f"{'error':>8}{'EW error':>10}")
    for name, series in traces:
        found = {bucket: [] for bucket, _least in BUCKETS}
        for usage in series:
            for bucket, rows in replay(usage, args.period_days).items():
                found[bucket] += rows
        for bucket, _least in BUCKETS:
            rows = found[bucket]
            pooled[bucket] += rows
            print(f"{name:<14}{bucket:>10}{len(rows):>6}" + _figures(rows), flush=True)
    for bucket, _least in BUCKETS:
        print(f"{'all traces':<14}{bucket:>10}{len(pooled[bucket]):>6}" + _figures(pooled[bucket]))
    prior = pooled_spread([usage for _name, series in traces for usage in series])
    print(f"The spread fitted on every trace's errors pooled (loans.maths.forecast.PRIOR, a new "
          f"team's): iid {prior.iid:.3f}, level {prior.level:.4f}; PRIOR is iid "
          f"{forecast.PRIOR.iid:.3f}, level {forecast.PRIOR.level:.4f}")


def pooled_spread(series: list[dict[datetime, float]]) -> forecast.Spread:
    """forecast.fitted on the errors of every trace, whole, pooled horizon by horizon."""
    pooled: dict[int, list[float]] = {h: [] for h in range(1, forecast.LONGEST + 1)}
    for usage in series:
        first = min(usage)
        count = int(((max(usage) - first).total_seconds() + 3600) // 86400)
        days = [0.0] * count
        for hour, value in usage.items():
            days[int((hour - first).total_seconds() // 86400)] += value
        for horizon, found in pooled.items():
            found += forecast.errors(days, horizon)
    return forecast.fitted([(h, sum(e * e for e in found) / len(found), len(found))
                            for h, found in pooled.items() if found])


def _figures(rows: list[tuple]) -> str:
    if not rows:
        return "  (no forecast)"
    share = [sum(r[k] for r in rows) / len(rows) for k in range(3)]
    errors = [statistics.fmean(r[k] for r in rows) for k in (3, 4)]
    return (f"{share[0]:>9.0%}{share[1]:>8.0%}{share[2]:>9.0%}{errors[0]:>8.1%}"
            f"{errors[1]:>10.1%}")


if __name__ == "__main__":
    main()
