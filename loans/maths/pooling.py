"""The commitments a sharing group should hold (DESIGN "Sharing a commitment"): those that
minimise the group's expected cost a period under the group's sharing rule, priced on the
history's period-long windows with the very function the close uses (sharing.allocate). Pure.

A group pays the provider its members' commitments plus the overage left after sharing, each
at its own overage rate; what members pay each other for borrowed hours nets to nothing. In one
window, with commitments c:

    cost(c) = sum_i c_i r_c,i + sum_i (max(0, u_i - c_i) - borrowed_i(c)) r_o,i

The advice is the c that minimises the mean of cost(c) over the windows (every member's usage
in the same hours). One member's commitment is not advised alone while its partners keep
theirs: a team over its commitment beside a partner that wastes most of its own would be told
to commit nothing, and the partner to commit less, and the two together would cost more. So
the members are advised together, one at a time in turn from today's commitments (coordinate
descent), each to the candidate that lowers the group's expected cost most with the others
as they stand; then each member in turn hands part or all of its hours to another where that
lowers the group's cost (one member alone moves commitment only in small steps, since hours
given up cost the group until another takes them up); until a round changes nothing. The
member that leaves most of its commitment unused moves first: where rates are alike the
group's cost does not care who holds the commitment, and the advice then trims the waste
where it is instead of telling a team that runs over its commitment to commit nothing and
borrow.
"""

import statistics
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from loans.maths.sharing import Account, allocate

ROUNDS = 50  # a cap: a thousand random groups of two to four settled within five rounds
QUANTILES = 20  # candidates of each kind: the 0%, 5%, ..., 100% quantiles


@dataclass(frozen=True)
class Seat:
    """One member as the advice reads it: its key, today's commitment (the terms a change
    would replace), its two rates, its usage in each window, and whether its commitment may
    change (a contract in its last period keeps it)."""

    key: int
    committed: float
    committed_rate: float
    overage_rate: float
    windows: tuple[float, ...]
    may_change: bool = True


def window_costs(seats: list[Seat], commitments: dict[int, float]) -> list[float]:
    """The group's cost in each window with these commitments."""
    fixed = sum(commitments[s.key] * s.committed_rate for s in seats)
    rates = {s.key: s.overage_rate for s in seats}
    out = []
    for k in range(len(seats[0].windows) if seats else 0):
        accounts = [Account(s.key, commitments[s.key], s.windows[k], s.committed_rate,
                            s.overage_rate) for s in seats]
        overage = sum(max(0.0, a.used - a.committed) * a.overage_rate for a in accounts)
        covered = sum(hours * rates[borrower] for _l, borrower, hours in allocate(accounts))
        out.append(fixed + overage - covered)
    return out


def expected(seats: list[Seat], commitments: dict[int, float]) -> float:
    costs = window_costs(seats, commitments)
    return statistics.fmean(costs) if costs else 0.0


def own_costs(seats: list[Seat], commitments: dict[int, float], key: int) -> float:
    """One member's own expected cost a period under sharing: its commitment, its overage
    left, what it pays for hours borrowed less what it is credited for hours lent."""
    rates = {s.key: s.committed_rate for s in seats}
    me = next(s for s in seats if s.key == key)
    total = 0.0
    for k in range(len(me.windows)):
        accounts = [Account(s.key, commitments[s.key], s.windows[k], s.committed_rate,
                            s.overage_rate) for s in seats]
        cost = commitments[key] * me.committed_rate
        cost += max(0.0, me.windows[k] - commitments[key]) * me.overage_rate
        for lender, borrower, hours in allocate(accounts):
            if borrower == key:
                cost += hours * (rates[lender] - me.overage_rate)
            elif lender == key:
                cost -= hours * me.committed_rate
        total += cost
    return total / len(me.windows) if me.windows else 0.0


def whole(value: float) -> float:
    return float(Decimal(repr(value)).quantize(Decimal(1), rounding=ROUND_CEILING)
                 ) if value > 0 else 0.0


def _quantiles(values: list[float]) -> set[float]:
    ordered = sorted(values)
    found = set()
    for q in range(QUANTILES + 1):
        position = q / QUANTILES * (len(ordered) - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        found.add(whole(ordered[low] + (ordered[high] - ordered[low]) * (position - low)))
    return found


def candidates(seat: Seat, seats: list[Seat], commitments: dict[int, float]) -> list[float]:
    """Whole GPU-hours to try for one member, the others as they stand: nothing, today's
    commitment, the quantiles of its own window usage (where its own overage begins), and
    those of what would leave the group exactly covered in each window (its usage plus the
    others' usage past their commitments)."""
    if not seat.windows:
        return [whole(seat.committed)]
    others = [s for s in seats if s.key != seat.key]
    covered = [max(0.0, u + sum(s.windows[k] - commitments[s.key] for s in others))
               for k, u in enumerate(seat.windows)]
    return sorted({0.0, whole(seat.committed)} | _quantiles(list(seat.windows))
                  | _quantiles(covered))


def advise(seats: list[Seat]) -> dict[int, float]:
    """The commitments, by key, that the members should hold together (whole GPU-hours;
    unchanged for those that may not change). Ties keep the value nearest today's."""
    chosen = {s.key: s.committed for s in seats}
    memo: dict[tuple, float] = {}

    def price(values: dict[int, float]) -> float:
        key = tuple(values[s.key] for s in seats)
        if key not in memo:
            memo[key] = expected(seats, values)
        return memo[key]

    def unused(seat: Seat) -> float:
        return statistics.fmean([max(0.0, seat.committed - u) for u in seat.windows]) \
            if seat.windows else 0.0

    def better(values: dict[int, float], best_cost: float, seat: Seat, best: float) -> bool:
        cost = price(values)
        return cost < best_cost - 1e-9 or (
            abs(cost - best_cost) <= 1e-9
            and abs(values[seat.key] - seat.committed) < abs(best - seat.committed))

    order = sorted(seats, key=lambda s: (-unused(s), s.key))
    movable = [s for s in order if s.may_change]
    for _round in range(ROUNDS):
        moved = False
        for seat in movable:
            best = chosen[seat.key]
            for value in candidates(seat, seats, chosen):
                if better({**chosen, seat.key: value}, price({**chosen, seat.key: best}),
                          seat, best):
                    best = value
            if best != chosen[seat.key]:
                chosen[seat.key], moved = best, True
        # One member at a time moves commitment between members only in small steps (giving
        # up hours costs the group until another takes them up): also try handing a
        # member's hours, in part or whole, to another.
        for giver in movable:
            for taker in movable:
                if taker is giver or chosen[giver.key] <= 0:
                    continue
                start = price(chosen)
                for value in candidates(giver, seats, chosen):
                    if value >= chosen[giver.key]:
                        continue
                    trial = {**chosen, giver.key: value,
                             taker.key: chosen[taker.key] + chosen[giver.key] - value}
                    if price(trial) < start - 1e-9:
                        chosen, start, moved = trial, price(trial), True
        if not moved:
            break
    return chosen
