"""The floor's alert (DESIGN "The floor"): a contract whose availability so far this period
is within GUARANTEE_ALERT_POINTS percentage points of its guarantee, or below it, naming the
longest waits. Its subject is the floor's own (floor:contract:...), so refreshing a contract's
commitment alerts when its policy changes leaves it alone."""

from datetime import datetime

from django.conf import settings
from django.utils.translation import gettext_noop

from core.wording import worded
from loans.models import Alert, Contract
from loans.services.alerts.condition import Condition
from loans.services.guarantee import fleet

BELOW = gettext_noop(
    "%(tenant)s's base quota was there %(availability)s of period %(period)s so far, below "
    "its guarantee of %(guarantee)s: its jobs waited %(hours)s GPU-h for room, the longest "
    "%(job)s (%(gpus)s GPUs from %(at)s). At this availability the period credits "
    "%(credit)s %(currency)s.")
NEAR = gettext_noop(
    "%(tenant)s's base quota was there %(availability)s of period %(period)s so far, near "
    "its guarantee of %(guarantee)s: its jobs waited %(hours)s GPU-h for room, the longest "
    "%(job)s (%(gpus)s GPUs from %(at)s).")


def guarantee_conditions(now: datetime, contracts: list[Contract]) -> list[Condition]:
    out = []
    floors = fleet.floors(contracts, now)
    for contract in contracts:
        seen = floors.get(contract.pk)
        if seen is None or not seen.floor.worst or seen.floor.short_gpu_hours <= 0:
            continue
        floor = seen.floor
        if floor.points_above() >= settings.GUARANTEE_ALERT_POINTS:
            continue
        period = contract.period_at(now)
        w = floor.worst[0]
        values = {
            "tenant": contract.tenant.name, "period": period.index + 1,
            "availability": f"{floor.availability_pct:.2f}%",
            "guarantee": f"{floor.guarantee_pct.normalize():f}%",
            "hours": f"{floor.short_gpu_hours:,.1f}", "job": w.job, "gpus": w.gpus,
            "at": w.start.astimezone(contract.zone).strftime("%Y-%m-%d %H:%M"),
            "credit": f"{-seen.credit:,.2f}", "currency": seen.currency}
        out.append(Condition(
            Alert.Kind.GUARANTEE_AT_RISK,
            f"floor:contract:{contract.pk}:period:{period.index + 1}",
            contract.tenant_id, worded(BELOW if floor.below_guarantee else NEAR, values),
            {"availability": str(floor.availability), "guarantee_pct": str(floor.guarantee_pct),
             "short_gpu_hours": str(floor.short_gpu_hours), "credit": str(seen.credit),
             "waits": [{"job": x.job, "cluster": x.cluster, "gpus": x.gpus,
                        "from": x.start.isoformat(), "to": x.end.isoformat()}
                       for x in floor.worst]}))
    return out
