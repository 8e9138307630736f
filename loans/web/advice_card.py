"""The tenant page's advice card, as rows the template reads: each recommendation shown with
its chart, the P10/P50/P90 of its term's totals, a plan comparison, and a sharing group's
pooled costs for who may read them. Every figure is read off the recommendation's evidence
(loans.services.advice wrote it); nothing is worked out here."""

from datetime import timedelta
from decimal import Decimal

from django.db.models import Q
from django.utils.translation import gettext_lazy

from loans.models import Contract, Recommendation
from loans.web import charts

DECIDED_SHOWN = timedelta(days=30)
SHOWN_ORDER = {"open": 0, "accepted": 1, "applied": 2, "dismissed": 3}


def recommendations_of(contract: Contract, now, *, group_figures: bool = True
                       ) -> list[Recommendation]:
    """Open recommendations, those accepted and waiting for an operator, and those applied or
    dismissed in the last 30 days (so a decision stays visible), each with its figure where
    it has one; a sharing group's costs only for who may read them (`group_figures`)."""
    State = Recommendation.State
    recs = sorted(contract.recommendations.filter(
        Q(state__in=[State.OPEN, State.ACCEPTED])
        | Q(state__in=[State.APPLIED, State.DISMISSED],
            decided_at__gte=now - DECIDED_SHOWN)
    ).select_related("amendment", "applied_by", "decided_by"),
        key=lambda r: (SHOWN_ORDER[r.state], r.kind))
    for rec in recs:
        rec.figure = charts.commitment_figure(rec) if rec.kind == "commitment" else None
        rec.totals = term_totals(rec)
        rec.plans = plan_rows(rec)
        rec.pooled = pooled_rows(rec) if group_figures else []
        rec.figure_id = f"chart-recommendation-{rec.pk}-data"
    return recs


TOTAL_ROWS = (("recommended", gettext_lazy("advised")), ("current", gettext_lazy("current")),
              ("rule_of_thumb", gettext_lazy("Rule of thumb")))


def term_totals(rec: Recommendation) -> list[dict]:
    """A commitment recommendation's P10/P50/P90 of the term's total cost for the advised,
    the current and the rule-of-thumb commitment, as table rows (none without a term)."""
    term = (rec.evidence or {}).get("term") if rec.kind == "commitment" else None
    totals = (term or {}).get("totals") or {}
    return [{"label": label, "commitment": Decimal(str(rec.evidence[name])).normalize(),
             **{q: Decimal(str(v)) for q, v in zip(("p10", "p50", "p90"), totals[name],
                                                   strict=True)}}
            for name, label in TOTAL_ROWS if name in totals and name in rec.evidence]


POOLED_ROWS = (("current", gettext_lazy("With the commitments as they are")),
               ("standalone", gettext_lazy("With this team's commitment advised alone")),
               ("recommended", gettext_lazy("With the commitment advised for sharing")))


def pooled_rows(rec: Recommendation) -> list[dict]:
    """A sharing group's pooled advice, as table rows: the group's expected cost a period
    with the commitments as they are, with this team's advised alone, and as advised."""
    pooled = (rec.evidence or {}).get("pooled") if rec.kind == "commitment" else None
    costs = (pooled or {}).get("group_costs") or {}
    rows = []
    for name, label in POOLED_ROWS:
        try:
            rows.append({"label": label, "cost": Decimal(str(costs[name]))})
        except (KeyError, ArithmeticError):
            continue
    return rows


def plan_rows(rec: Recommendation) -> list[dict]:
    """A plan recommendation's comparison, as table rows: the current terms first, then each
    offered plan as priced (rows written before the term model carry no periods or still-owed
    money: those cells stay empty)."""
    if rec.kind != "plan" or not isinstance((rec.evidence or {}).get("plans"), list):
        return []
    evidence = rec.evidence

    def amount(value) -> Decimal | None:
        try:
            return Decimal(str(value)) if value not in (None, "") else None
        except ArithmeticError:
            return None

    rows = [{"plan": rec.current, "current": True, "cost": amount(evidence.get("current_cost")),
             "fee": amount(evidence.get("current_upfront_fee")), "owed": None,
             "fits": evidence.get("current_fits_peak"),
             "guarantees": evidence.get("current_guarantees_base")}]
    rows += [{"plan": p.get("plan", ""), "current": False, "cost": amount(p.get("cost")),
              "fee": amount(p.get("upfront_fee_share")), "owed": amount(p.get("still_owed")),
              "fits": bool(p.get("fits_peak")), "guarantees": bool(p.get("guarantees_base")),
              "advised": p.get("plan") == rec.recommended}
             for p in evidence["plans"] if isinstance(p, dict)]
    return rows
