"""Synthetic usage for bench/forecast.py: a young fleet shaped like real per-team GPU usage of
one cluster's month (the shape a held-back trace of 16 teams showed; its rows are not here).

Each fleet has 16 teams, every team new at the period's start: monthly use log-uniform from
about 20 to 14,000 GPU-h; three near-constant teams (3% daily noise), six whose level shifts 2-5x
once or twice within the month, four that idle for 2-6 days at a time and come back, three
that do both; the rest of the noise log-normal (30% a day), half of the teams with a working
week (weekends at half); teams under 200 GPU-h a day counted in whole GPU-hours (Poisson), so
the small ones are lumpy. Plain functions, seeded.
"""

import math
import random

KINDS = ["constant"] * 3 + ["shift"] * 6 + ["idle"] * 4 + ["shift-idle"] * 3
SMALLEST, LARGEST = 20.0, 14_000.0  # GPU-h a month


def fleet(seed: int, days: int = 30) -> list[list[float]]:
    """16 teams' daily GPU-hours over `days` days, oldest first."""
    rng = random.Random(f"fleet-{seed}")
    kinds = list(KINDS)
    rng.shuffle(kinds)
    return [team(rng, kind, days, math.exp(rng.uniform(math.log(SMALLEST), math.log(LARGEST))))
            for kind in kinds]


def team(rng: random.Random, kind: str, days: int, monthly: float) -> list[float]:
    base, level, idle = monthly / 30, 1.0, 0
    shifts = ({rng.randint(3, days - 3) for _ in range(rng.randint(1, 2))}
              if "shift" in kind else set())
    weekly, weekday = kind != "constant" and rng.random() < 0.5, rng.randint(0, 6)
    out = []
    for day in range(days):
        if day in shifts:
            factor = rng.uniform(2, 5)
            level = level * factor if rng.random() < 0.5 or level < 0.5 else level / factor
        if "idle" in kind and idle == 0 and rng.random() < 0.12:
            idle = rng.randint(2, 6)
        if idle:
            idle -= 1
            out.append(0.0)
            continue
        if kind == "constant":
            value = base * rng.gauss(1, 0.03)
        else:
            value = base * level * math.exp(rng.gauss(0, 0.3))
            if weekly and (day + weekday) % 7 >= 5:
                value *= 0.5
        value = max(0.0, value)
        out.append(float(poisson(rng, value)) if value < 200 else value)
    return out


def poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, count, product = math.exp(-mean), 0, 1.0
    while True:
        product *= rng.random()
        if product <= limit:
            return count
        count += 1
