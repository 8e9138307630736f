"""A contract's statements as a finance team loads them: every statement with its lines and the
terms it was priced with (JSON), and one row per line (the `statements` CSV; the same charges
in the FinOps FOCUS 1.2 columns: loans.services.exports.focus). Every figure comes from the
stored statements, correction and sharing lines (loans.services.ledger.read reads them);
nothing is priced here."""

from datetime import datetime
from decimal import Decimal

from loans.maths import billing
from loans.models import Contract, Statement
from loans.services.exports.lines import Line, lines
from loans.services.ledger.read import Ledger


def _iso(moment: datetime, contract: Contract) -> str:
    return moment.astimezone(contract.zone).isoformat()


def as_json(ledger: Ledger) -> dict:
    contract = ledger.contract
    terms = {e.period.index: e.terms for e in ledger.entries}
    return {
        "contract": contract.pk, "tenant": contract.tenant.slug, "plan": contract.plan.name,
        "time_zone": contract.time_zone, "currency": contract.currency,
        "billed_total": str(billing.money(ledger.billed_money, contract.currency)),
        "statements": [_statement(s, terms.get(s.period_index), contract)
                       for s in ledger.statements],
        "pending_corrections": [
            {"period": entry.period.index + 1, **_correction_figures(c, contract.currency)}
            for entry, c in ledger.pending],
    }


def _statement(s: Statement, terms: billing.Terms | None, contract: Contract) -> dict:
    return {
        "number": s.number, "kind": s.kind, "closed_at": s.closed_at.isoformat(),
        "period": {"number": s.number, "start": _iso(s.period_start, contract),
                   "end": _iso(s.period_end, contract)},
        "terms": None if s.kind != Statement.Kind.PERIOD else {
            "committed_gpu_hours": str(s.committed_gpu_hours),
            "committed_rate": str(s.committed_rate), "overage_rate": str(s.overage_rate),
            "base_quota_gpus": terms.base_quota_gpus if terms else None,
            "max_quota_gpus": terms.max_quota_gpus if terms else None},
        "allocated_gpu_hours": str(s.allocated_gpu_hours),
        "busy_gpu_hours": str(s.busy_gpu_hours), "completeness": str(s.completeness),
        "lines": [_line(line) for line in lines(s)],
        "floor": None if s.kind != Statement.Kind.PERIOD or s.availability is None else {
            "availability": str(s.availability), "guarantee_pct": str(s.guarantee_pct),
            "short_gpu_hours": str(s.short_gpu_hours), "credit_pct": str(s.credit_pct),
            "credit": str(billing.money(s.credit, s.currency))},
        "sharing": None if s.standalone_overage_cost is None else {
            "overage_without_sharing": str(billing.money(s.standalone_overage_cost,
                                                         s.currency)),
            "shared_cost": str(billing.money(s.shared_cost, s.currency)),
            "saving": str(billing.money(s.sharing_saving, s.currency))},
        "total": str(billing.money(s.total_cost, s.currency)), "currency": s.currency,
    }


def _line(line: Line) -> dict:
    out = {"kind": line.kind, "gpu_hours": str(line.gpu_hours), "rate": str(line.rate),
           "amount": str(line.amount)}
    if line.shares is not None:
        other = line.shares.counterpart
        out |= {"counterpart": {"contract": other.pk, "tenant": other.tenant.name},
                "group": line.shares.group.name}
    if line.corrects is not None:
        out |= {"corrects_period": line.corrects.period_index + 1,
                **_correction_figures(line.corrects, line.statement.currency)}
    return out


def _correction_figures(c, currency: str) -> dict:
    def amount(value: Decimal) -> str:
        return str(billing.money(value, currency))

    return {
        "gpu_hours": str(c.gpu_hours), "billed_gpu_hours": str(c.billed_gpu_hours),
        "committed_gpu_hours": str(c.committed_gpu_hours), "overage_rate": str(c.overage_rate),
        "overage_before": {"gpu_hours": str(c.overage_before_gpu_hours),
                           "amount": amount(c.overage_before_cost)},
        "overage_after": {"gpu_hours": str(c.overage_after_gpu_hours),
                          "amount": amount(c.overage_after_cost)},
        "sharing_before": amount(c.sharing_before_cost),
        "sharing_after": amount(c.sharing_after_cost),
        "credit_before": amount(c.credit_before_cost),
        "credit_after": amount(c.credit_after_cost),
        "amount": amount(c.amount),
    }


NAME = "statements"
COLUMNS = ("statement", "kind", "period_start", "period_end", "line", "corrects_period",
               "gpu_hours", "rate", "amount", "currency")


def rows(ledger: Ledger) -> list[list]:
    """One row a line of every statement, in COLUMNS' order."""
    contract = ledger.contract
    rows = []
    for s in ledger.statements:
        for line in lines(s):
            rows.append([s.number, s.kind, _iso(s.period_start, contract),
                         _iso(s.period_end, contract), line.kind,
                         line.corrects.period_index + 1 if line.corrects else "",
                         line.gpu_hours, line.rate, line.amount, s.currency])
    return rows
