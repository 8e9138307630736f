"""A period's floor as integrations read it (the burn-down's `floor`): the availability so
far (or final) against the guarantee, the short GPU-hours, the service credit it earns and
the longest waits, with what the team held when each began."""

from decimal import Decimal
from zoneinfo import ZoneInfo

from loans.maths import billing
from loans.services.ledger.read import PeriodEntry

PERCENT = Decimal("0.01")


def floor_json(entry: PeriodEntry, zone: ZoneInfo) -> dict | None:
    """None where the period can no longer be measured (its raw samples purged)."""
    floor = entry.floor
    if floor is None:
        return None
    return {
        "availability": str(floor.availability), "guarantee_pct": str(floor.guarantee_pct),
        "below_guarantee": floor.below_guarantee,
        "short_gpu_hours": str(floor.short_gpu_hours),
        "measured_until": floor.until.astimezone(zone).isoformat(),
        "credit_tiers": entry.terms.credit_tiers,
        "credit_pct": str(floor.credit_pct.quantize(PERCENT)),  # as statements keep it
        "credit": str(billing.money(entry.credit, entry.terms.currency)),
        "waits": floor.waits,
        "longest_waits": [
            {"cluster": w.cluster, "job": w.job, "gpus": w.gpus,
             "from": w.start.astimezone(zone).isoformat(),
             "to": None if w.still_waiting else w.end.astimezone(zone).isoformat(),
             "held_gpus": w.held}
            for w in floor.worst],
    }
