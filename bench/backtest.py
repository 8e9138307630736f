"""Back-test of the commitment recommender against two baselines on synthetic usage histories.

    .venv/bin/python bench/backtest.py [--seeds 5] [--months 12] [--overage-multiplier 1.2]

Each history is a year of hourly GPU usage from the demo's generator (a working-day rhythm,
noise, and three-day training bursts) bent into a shape: steady, growing, seasonal, bursty or
shrinking. For every month after the first, each policy picks the commitment from the months
before it, and pays for the month as billed: C * r_c + max(0, U - C) * r_o.

  recommender   loans.maths.recommend.advise_commitment (what the daily job recommends)
  keep          the commitment signed at the start (the first month's usage), never changed
  80% of avg    80% of the average monthly usage so far

Prints the realised cost per shape and policy and the recommender's cost against the better
baseline. Targets: never more than 1% above the better baseline on any shape, and cheaper in
total. No database: the generator and the recommender are plain functions.
"""

import argparse
import math
import os
import random
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")  # no server and no secrets: development settings
django.setup()  # the demo generator lives beside the demo's models; no database is touched

from loans.demo import STORIES, gpus_held, is_bursting  # noqa: E402
from loans.maths import recommend  # noqa: E402

MONTH_HOURS = 30 * 24
ZONE = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 1, 6, tzinfo=UTC)
RATE = Decimal(10)


def shape_factor(shape: str, month: float, rng: random.Random, bursts: set[int], day: int):
    if shape == "steady":
        return 1.0
    if shape == "growing":
        return 1.0 + 0.07 * month
    if shape == "shrinking":
        return max(0.2, 1.0 - 0.06 * month)
    if shape == "seasonal":
        return 1.0 + 0.35 * math.sin(2 * math.pi * month / 6)
    if shape == "bursty":
        return 1.8 if day in bursts else 0.8
    raise ValueError(shape)


def history(shape: str, seed: int, months: int) -> list[float]:
    """Hourly GPU-hours held: a demo story's rhythm times the shape."""
    story = STORIES[seed % len(STORIES)]
    rng = random.Random(f"{shape}:{seed}")
    days = months * 30
    bursts = {d for start in rng.sample(range(days), days // 12) for d in range(start, start + 3)}
    out = []
    for hour in range(days * 24):
        moment = START + timedelta(hours=hour)
        local = moment.astimezone(ZONE)
        held = gpus_held(story, local, rng, is_bursting(story, local.date()))
        factor = shape_factor(shape, hour / MONTH_HOURS, rng, bursts, hour // 24)
        out.append(max(0.0, held * factor))
    return out


def bill(commitment: Decimal, used: float, overage_rate: Decimal) -> Decimal:
    return commitment * RATE + max(Decimal(0), Decimal(repr(used)) - commitment) * overage_rate


def replay(hourly: list[float], months: int, overage_rate: Decimal) -> dict[str, Decimal]:
    monthly = [sum(hourly[m * MONTH_HOURS:(m + 1) * MONTH_HOURS]) for m in range(months)]
    signed = recommend.whole(monthly[0])
    costs = {"recommender": Decimal(0), "keep": Decimal(0), "80% of avg": Decimal(0)}
    current = signed
    for m in range(1, months):
        past = hourly[:m * MONTH_HOURS]
        advice = recommend.advise_commitment(past, period_hours=MONTH_HOURS, current=current,
                                             committed_rate=RATE, overage_rate=overage_rate)
        if advice is not None:
            current = advice.recommended
        rule = recommend.whole(0.8 * sum(monthly[:m]) / m)
        costs["recommender"] += bill(current, monthly[m], overage_rate)
        costs["keep"] += bill(signed, monthly[m], overage_rate)
        costs["80% of avg"] += bill(rule, monthly[m], overage_rate)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--overage-multiplier", type=Decimal, default=Decimal("1.2"))
    args = parser.parse_args()
    overage = RATE * args.overage_multiplier
    print(f"{args.seeds} seeds a shape, {args.months} months, committed rate {RATE}, "
          f"overage rate {overage}; costs summed over months 2-{args.months}")
    print(f"  {'shape':<10}{'recommender':>14}{'keep':>14}{'80% of avg':>14}"
          f"{'vs better':>11}")
    totals = {"recommender": Decimal(0), "keep": Decimal(0), "80% of avg": Decimal(0)}
    worst = Decimal(-1)
    for shape in ("steady", "growing", "seasonal", "bursty", "shrinking"):
        sums = {name: Decimal(0) for name in totals}
        for seed in range(args.seeds):
            for name, value in replay(history(shape, seed, args.months), args.months,
                                      overage).items():
                sums[name] += value
        better = min(sums["keep"], sums["80% of avg"])
        ratio = sums["recommender"] / better - 1
        worst = max(worst, ratio)
        for name in totals:
            totals[name] += sums[name]
        print(f"  {shape:<10}{sums['recommender']:>14,.0f}{sums['keep']:>14,.0f}"
              f"{sums['80% of avg']:>14,.0f}{ratio:>+11.2%}")
    better_total = min(totals["keep"], totals["80% of avg"])
    print(f"  {'total':<10}{totals['recommender']:>14,.0f}{totals['keep']:>14,.0f}"
          f"{totals['80% of avg']:>14,.0f}{totals['recommender'] / better_total - 1:>+11.2%}")
    print(f"targets: worst shape {worst:+.2%} against the better baseline (target <= +1%); "
          f"total {totals['recommender'] / better_total - 1:+.2%} (target < 0)")


if __name__ == "__main__":
    main()
