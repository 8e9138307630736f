"""The verdict at the top of a lead's page: where the open period is heading in GPU-hours and
money, what sharing covers, and the open recommendation with the largest expected saving, in
one or two sentences from the figures the cards below show (loans.services.ledger.bills). A verdict
rounds to whole GPU-hours and whole money units and says "about"; the cards keep the bill's
precision."""

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from django.utils.translation import gettext as _

from loans.services.ledger import bills, dashboard, pooled
from loans.services.ledger import read as ledgers
from loans.services.ledger.bills import Bill
from loans.templatetags.gpuloans import figure


@dataclass(frozen=True)
class Verdict:
    heading: str  # where the period is heading
    action: str | None  # what would save most, where anything would
    tone: str  # "bad" overage billed, "warn" past the commitment or hours unused, "" on track


def _whole(value: Decimal) -> str:
    return f"{value.quantize(Decimal(1), rounding=ROUND_HALF_UP):,}"


def verdict(*, projected: Bill, exhaustion: datetime | None, now: datetime, zone: ZoneInfo,
            recommendations=()) -> Verdict:
    """The open period's verdict from its projected bill and the day its commitment runs
    out (the burn-down's), with the open recommendations of the contract."""
    parts = []
    tone = ""
    if exhaustion is not None:
        day = exhaustion.astimezone(zone).strftime("%m-%d")
        parts.append(_("Ran out on %(day)s") % {"day": day} if exhaustion <= now
                     else _("Runs out on %(day)s") % {"day": day})
    past = projected.past_commitment_gpu_hours
    if past > 0:
        # Past the commitment is bad news only where it is billed at the overage rate.
        tone = "bad" if projected.overage_gpu_hours > 0 else "warn"
        parts.append(_("about %(hours)s GPU-h over the commitment") % {"hours": _whole(past)})
        if projected.borrowed_gpu_hours > 0:
            if projected.overage_gpu_hours <= 0:
                parts.append(_("sharing covers it at %(rate)s a GPU-h") % {
                    "rate": f"{projected.sharing_cost / projected.borrowed_gpu_hours:,.2f}"})
            else:
                parts.append(_("sharing covers %(hours)s GPU-h of it") % {
                    "hours": _whole(projected.borrowed_gpu_hours)})
    elif projected.unused_gpu_hours > 0:
        tone = "warn"
        parts.append(_("about %(hours)s committed GPU-h left unused") % {
            "hours": _whole(projected.unused_gpu_hours)})
    else:
        parts.append(_("on track to use the commitment"))
    if projected.lent_gpu_hours > 0:
        parts.append(_("about %(hours)s GPU-h lent to partners") % {
            "hours": _whole(projected.lent_gpu_hours)})
    parts.append(_("expect about %(money)s %(currency)s") % {
        "money": _whole(projected.total), "currency": projected.currency})
    heading = _("; ").join(parts) + _(".")
    heading = heading[:1].upper() + heading[1:]
    best = max((r for r in recommendations if r.state == "open" and r.expected_saving
                and r.expected_saving > 0), key=lambda r: r.expected_saving, default=None)
    action = None
    if best is not None:
        action = _("Largest expected saving: the %(advice)s advice, %(current)s → "
                   "%(recommended)s, about %(money)s %(currency)s a period.") % {
            "advice": best.get_kind_display(), "current": figure(best.current),
            "recommended": figure(best.recommended), "money": _whole(best.expected_saving),
            "currency": best.currency}
    return Verdict(heading, action, tone)


@dataclass(frozen=True)
class OpenPeriod:
    contract: object
    figures: object  # loans.maths.figures.PeriodFigures
    verdict: Verdict


def open_period(contract, now: datetime) -> OpenPeriod | None:
    """The contract's open period as its page shows it: the figures its burn-down is drawn
    from and the verdict above them (the digest's words and picture); None where no period
    is open now."""
    ledger = ledgers.read(contract, now)
    entry = ledger.current
    if entry is None or entry.state != "open":
        return None
    found = dashboard.figures(contract, entry.period, now, entry)
    pool = pooled.pool_of(contract, now, ledger.groups)
    projected = bills.projected(contract.pk, entry.terms, entry.period,
                                found.projected_used_gpu_hours, pool, entry.credit)
    said = verdict(projected=projected, exhaustion=found.projected_exhaustion, now=now,
                   zone=contract.zone,
                   recommendations=list(contract.recommendations.filter(state="open")))
    return OpenPeriod(contract, found, said)
