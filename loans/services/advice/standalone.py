"""The recommendation job: reads each active contract's hourly history, asks loans.maths.recommend,
and keeps one open recommendation per contract and kind up to date. A lead's decision is
respected: a recommendation dismissed or accepted is not raised again with the same value,
or one within ADVICE_MOVE_PERCENT of it, for 30 days."""

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_noop

from core.wording import worded
from loans.maths import quotas, recommend
from loans.models import BurstRequest, Contract, Recommendation, SharingMember
from loans.models.contracts import with_amendments
from loans.services.advice import plans as plan_advice
from loans.services.advice import pooled as pooled_advice
from loans.services.advice.drafts import (
    Draft,
    History,
    Kind,
    history,
    periods_ahead,
    terms_ahead,
)

QUOTA_DAYS = 30
RESPECT_DECISION = timedelta(days=30)
QUEUE_WAIT = timedelta(minutes=1)  # a grant later than this waited for GPUs


def term_model(contract: Contract, past: History, period_hours: int,
               now: datetime) -> recommend.TermAdvice | None:
    """The demand model over the periods a change made now would hold, fitted once for the
    commitment, the base quota and the plan."""
    terms = terms_ahead(contract, now)
    months, _renewal = periods_ahead(contract, now)
    return recommend.term_commitment(
        past.allocated, period_hours=period_hours, months=months,
        committed_rate=terms.committed_rate, overage_rate=terms.overage_rate)


def commitment_draft(contract: Contract, past: History, period_hours: int, now: datetime,
                     term: recommend.TermAdvice | None = None) -> Draft | None:
    terms = terms_ahead(contract, now)
    months, renewal = periods_ahead(contract, now)
    advice = recommend.advise_commitment(
        past.allocated, period_hours=period_hours, current=terms.committed_gpu_hours,
        committed_rate=terms.committed_rate, overage_rate=terms.overage_rate,
        currency=terms.currency, term_months=months, term=term)
    if advice is None or not advice.worth_changing:
        return None
    # Below 1% of the commitment the change is noise, not advice.
    if abs(advice.recommended - advice.current) < advice.current / 100:
        return None
    facts = {
        "recommended": f"{advice.recommended:,.0f}", "current": f"{advice.current:,.0f}",
        "cost": f"{advice.expected_cost:,.2f}", "current_cost": f"{advice.current_cost:,.2f}",
        "currency": terms.currency, "rule": f"{advice.rule_of_thumb:,.0f}",
        "rule_cost": f"{advice.rule_cost:,.2f}", "months": months}
    if advice.term is None:
        wording = worded(gettext_noop(
            "Commit %(recommended)s GPU-h a period instead of %(current)s: expected cost "
            "%(cost)s instead of %(current_cost)s %(currency)s a period (the rule of thumb, "
            "80%% of average use, %(rule)s GPU-h, would cost %(rule_cost)s)."), facts)
    elif renewal:
        wording = worded(gettext_noop(
            "For the next term (%(months)s periods), commit %(recommended)s GPU-h a period "
            "instead of %(current)s: expected cost %(cost)s instead of %(current_cost)s "
            "%(currency)s a period over it (the rule of thumb, 80%% of average use, %(rule)s "
            "GPU-h, would cost %(rule_cost)s)."), facts)
    else:
        wording = worded(gettext_noop(
            "For the %(months)s periods left in the term, commit %(recommended)s GPU-h a "
            "period instead of %(current)s: expected cost %(cost)s instead of "
            "%(current_cost)s %(currency)s a period over them (the rule of thumb, 80%% of "
            "average use, %(rule)s GPU-h, would cost %(rule_cost)s)."), facts)
    term = advice.term
    totals = None if term is None else term.totals(
        {"recommended": float(advice.recommended), "current": float(advice.current),
         "rule_of_thumb": float(advice.rule_of_thumb)},
        terms.committed_rate, terms.overage_rate)
    return Draft(
        kind=Kind.COMMITMENT, current=f"{advice.current:.0f}",
        recommended=f"{advice.recommended:.0f}", wording=wording,
        expected_saving=advice.saving, confidence=advice.confidence,
        lookback_days=advice.lookback_days,
        evidence={
            "curve": [[round(p.commitment, 3), round(p.expected, 2), round(p.p10, 2),
                       round(p.p90, 2)] for p in advice.curve],
            "recommended": float(advice.recommended), "current": float(advice.current),
            "rule_of_thumb": float(advice.rule_of_thumb), "windows": advice.windows,
            "independent_periods": round(recommend.independent_periods(
                advice.lookback_days, period_hours), 1),
            "long_optimum": round(advice.long_optimum, 3),
            "short_optimum": None if advice.short_optimum is None
            else round(advice.short_optimum, 3),
            "forecast_optimum": None if advice.drift_optimum is None
            else round(advice.drift_optimum, 3),
            "quantile": round(1 - float(terms.committed_rate / terms.overage_rate), 4),
            "costs": {"recommended": str(advice.expected_cost),
                      "current": str(advice.current_cost), "rule_of_thumb": str(advice.rule_cost)},
            "term": None if term is None else {
                "periods": months, "renewal": renewal, "fitted_periods": term.periods,
                "trend_gpu_hours_per_period": round(term.slope, 1),
                "p10": [round(v, 1) for v in term.p10], "p50": [round(v, 1) for v in term.p50],
                "p90": [round(v, 1) for v in term.p90],
                # Each commitment's total cost over the term's periods, P10/P50/P90.
                "totals": {name: [round(v, 2) for v in bands]
                           for name, bands in totals.items()}},
        },
    )


def pressed_bursts(contract: Contract, now: datetime) -> tuple[int, int]:
    """Burst requests of the quota lookback that waited in the queue or were refused, and the
    most GPUs one of them asked for: a team short of GPUs, not one that bursts by plan."""
    State = BurstRequest.State
    pressed = [r.gpus for r in BurstRequest.objects.filter(
        contract=contract, created_at__gte=now - timedelta(days=QUOTA_DAYS)).only(
            "gpus", "state", "created_at", "decided_at")
        if r.state in (State.REJECTED, State.EXPIRED, State.QUEUED)
        or (r.state in (State.GRANTED, State.CANCELLED, State.REVOKED) and r.decided_at
            and r.decided_at - r.created_at > QUEUE_WAIT)]
    return len(pressed), max(pressed, default=0)


def quota_drafts(contract: Contract, past: History, now: datetime,
                 term: recommend.TermAdvice | None = None) -> list[Draft]:
    """Quotas from the last QUOTA_DAYS' concurrent GPUs, grown as the term model forecasts
    usage over the periods ahead (as they are without one)."""
    terms = terms_ahead(contract, now)
    recent = QUOTA_DAYS * 24
    pressed, pressed_gpus = pressed_bursts(contract, now)
    drafts = []
    for advice in quotas.advise_quotas(
            past.peaks[-recent:], past.allocated[-recent:], past.busy[-recent:],
            base=terms.base_quota_gpus, cap=terms.max_quota_gpus, pressed=pressed,
            pressed_gpus=pressed_gpus, growth=term.growth if term else None,
            burst_share=settings.BURST_HOURS_PERCENT / 100):
        e = advice.evidence
        if advice.kind == "base_quota" and e.get("scale_up"):
            wording = worded(gettext_noop(
                "Raise the base quota to %(new)s GPUs (now %(old)s): %(busy).0f%% of the GPU "
                "time held over the last %(days)s days was busy, and %(pressed)s burst requests "
                "waited in the queue or were refused."), {
                "new": f"{advice.recommended:,}", "old": f"{advice.current:,}",
                "busy": e["busy_share"] * 100, "days": QUOTA_DAYS, "pressed": pressed})
        elif advice.kind == "base_quota":
            # The last QUOTA_DAYS' hours, grown as forecast over each of the periods ahead
            # (quotas.base_for_bursts); lowered only below 70% of the quota.
            facts = {"new": f"{advice.recommended:,}", "old": f"{advice.current:,}",
                     "days": QUOTA_DAYS, "months": e["periods_ahead"],
                     "now_share": e["burst_share_now"] * 100,
                     "new_share": e["burst_share_advised"] * 100,
                     "allowed": settings.BURST_HOURS_PERCENT}
            if advice.recommended > advice.current:
                wording = worded(gettext_noop(
                    "Raise the base quota to %(new)s GPUs (now %(old)s): with the last "
                    "%(days)s days' use grown as forecast over the %(months)s periods ahead, "
                    "more than %(old)s GPUs would be in use at once in %(now_share).1f%% of "
                    "hours, each needing a burst; above %(new)s GPUs in %(new_share).1f%%, "
                    "within the %(allowed)s%% allowed."), facts)
            else:
                wording = worded(gettext_noop(
                    "Lower the base quota to %(new)s GPUs (now %(old)s): with the last "
                    "%(days)s days' use grown as forecast over the %(months)s periods ahead, "
                    "more than %(new)s GPUs would be in use at once in only %(new_share).1f%% "
                    "of hours (%(allowed)s%% may need a burst), so most of the guarantee "
                    "would go unused."), facts)
        elif advice.kind == "max_quota":
            wording = worded(gettext_noop(
                "Raise the max quota to %(new)s GPUs (now %(old)s, plus a quarter): usage sat "
                "at the cap in %(share).1f%% of hours."), {
                "new": f"{advice.recommended:,}", "old": f"{advice.current:,}",
                "share": e["share_of_hours_at_cap"] * 100})
        else:
            wording = worded(gettext_noop(
                "Only %(share).0f%% of the GPU time held was busy over the last %(days)s days "
                "(%(idle)s idle GPU-h): consolidate jobs onto fewer GPUs."), {
                "share": e["busy_share"] * 100, "days": QUOTA_DAYS,
                "idle": f"{e['idle_gpu_hours']:,.0f}"})
        drafts.append(Draft(
            kind=advice.kind, wording=wording, lookback_days=QUOTA_DAYS, evidence=e,
            current="" if advice.current is None else str(advice.current),
            recommended="" if advice.recommended is None else str(advice.recommended)))
    return drafts


def plan_draft(contract: Contract, past: History, period_hours: int, now: datetime,
               term: recommend.TermAdvice | None = None) -> Draft | None:
    """Another plan of the catalogue, priced over the periods ahead on the demand model
    (loans.services.advice.plans), read on the quota lookback's concurrent GPUs."""
    _months, renewal = periods_ahead(contract, now)
    if term is None:
        term = term_model(contract, past, period_hours, now)
    choice = plan_advice.best_plan(contract, past.peaks[-QUOTA_DAYS * 24:], term, renewal)
    if choice is None:
        return None
    return Draft(kind=Kind.PLAN, current=contract.plan.name, recommended=choice.best.name,
                 wording=choice.wording, expected_saving=choice.saving,
                 lookback_days=term.periods * period_hours // 24, evidence=choice.evidence)


def period_hours_of(contract: Contract) -> int:
    """The hours of the commitment's period as advice reads it: the mean over the term, so
    that one commitment (the same number every period) is advised alike in February (672 h)
    and March (744 h)."""
    return round(statistics.fmean(p.hours for p in contract.periods()))


def drafts_for(contract: Contract, now: datetime, cache: dict | None = None) -> list[Draft]:
    """The contract's advice now (`cache`: the hourly series read so far, by tenant)."""
    if contract.period_at(now) is None:
        return []
    period_hours = period_hours_of(contract)
    past = history(contract, now, cache)
    term = term_model(contract, past, period_hours, now)
    alone = commitment_draft(contract, past, period_hours, now, term)
    # In a sharing group the commitment is the group's advice, under its sharing rule.
    grouped, shared = pooled_advice.pooled_draft(contract, now, period_hours, alone, cache)
    drafts = [shared if grouped else alone,
              *quota_drafts(contract, past, now, term),
              plan_draft(contract, past, period_hours, now, term)]
    return [d for d in drafts if d is not None]


def same_advice(decided: str, fresh: str) -> bool:
    """A fresh value is the decided one again when equal, or for numbers within
    ADVICE_MOVE_PERCENT of it: a dismissed 1,000 GPU-h does not come back as 1,001."""
    if decided == fresh:
        return True
    try:
        old, new = Decimal(decided), Decimal(fresh)
    except ArithmeticError:
        return False
    if not (old.is_finite() and new.is_finite()):
        return False
    return abs(new - old) <= abs(old) * Decimal(settings.ADVICE_MOVE_PERCENT) / 100


@dataclass(frozen=True)
class AdviceRun:
    created: int
    updated: int
    superseded: int
    contracts: int


def refresh_recommendations(now: datetime) -> AdviceRun:
    created = updated = superseded = count = 0
    # Every contract's amendments in one query, its terms worked out once (read-only: the
    # job writes recommendations, never terms).
    contracts = with_amendments(list(Contract.objects.filter(
        status=Contract.Status.ACTIVE).select_related("plan", "tenant")))
    # A sharing group's teams one after another, so each team's hours are read once for the
    # group's pooled advice and forgotten when the next group begins.
    group_of = dict(SharingMember.objects.filter(leaves_at__isnull=True,
                                                             voided_at__isnull=True)
                    .values_list("contract_id", "group_id"))
    cache: dict = {}
    current = None
    for contract in sorted(contracts, key=lambda c: (group_of.get(c.pk, 0), c.pk)):
        group = group_of.get(contract.pk)
        if group is None or group != current:
            cache.clear()
            current = group
        count += 1
        c, u, s = refresh_contract(contract, drafts_for(contract, now, cache), now)
        created, updated, superseded = created + c, updated + u, superseded + s
    return AdviceRun(created, updated, superseded, count)


def refresh_contract(contract: Contract, drafts: list[Draft],
                     now: datetime) -> tuple[int, int, int]:
    created = updated = superseded = 0
    currency = contract.terms().currency
    with transaction.atomic():
        current = {r.kind: r for r in Recommendation.objects.select_for_update().filter(
            contract=contract, state=Recommendation.State.OPEN)}
        decided = list(Recommendation.objects.filter(
            contract=contract, decided_at__gte=now - RESPECT_DECISION,
            state__in=[Recommendation.State.ACCEPTED, Recommendation.State.DISMISSED,
                       Recommendation.State.APPLIED]).values_list("kind", "recommended"))
        for draft in drafts:
            values = {"current": draft.current, "recommended": draft.recommended,
                      "message": draft.wording.english, "wording": draft.wording.stored(),
                      "expected_saving": draft.expected_saving,
                      "confidence": draft.confidence, "lookback_days": draft.lookback_days,
                      "evidence": draft.evidence, "currency": currency}
            if draft.kind in current:
                rec = current.pop(draft.kind)
                for name, value in values.items():
                    setattr(rec, name, value)
                rec.save(update_fields=list(values))
                updated += 1
            elif not any(kind == draft.kind and same_advice(value, draft.recommended)
                         for kind, value in decided):
                try:
                    with transaction.atomic():
                        Recommendation.objects.create(contract=contract, kind=draft.kind,
                                                      created_at=now, **values)
                    created += 1
                except IntegrityError:  # a concurrent run created it
                    pass
        for rec in current.values():  # no longer advised
            rec.state = Recommendation.State.SUPERSEDED
            rec.save(update_fields=["state"])
            superseded += 1
    return created, updated, superseded


# Sentences this job wrote before and rows still hold (a decided recommendation stays on the
# page for 30 days): kept in the catalogue so that those rows read in the reader's language.
RETIRED = (
    gettext_noop(
        "Raise the base quota to %(new)s GPUs (now %(old)s): in 95%% of the last "
        "%(days)s days' hours up to %(p95)s GPUs were in use at once, more than the "
        "quota guarantees; %(new)s covers them."),
    gettext_noop(
        "Lower the base quota to %(new)s GPUs (now %(old)s): in 95%% of the last "
        "%(days)s days' hours at most %(p95)s GPUs were in use at once, under 70%% "
        "of the quota. At %(new)s GPUs that use fills about 80%% of it (%(p95)s / "
        "0.8, rounded up)."),
    gettext_noop(
        "%(plan)s would have cost %(cost)s %(currency)s over the last three periods, its "
        "upfront fee of %(fee)s spread over its %(term)s months included, instead of "
        "%(own)s under the current terms."),
    gettext_noop(
        "%(plan)s would have cost %(cost)s %(currency)s over the last three periods "
        "instead of %(own)s under the current terms."),
)
