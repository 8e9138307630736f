"""Every started period of a contract, closed or not, as the tenant page's periods table shows
it: the figures at the usage the meter holds now (loans.services.ledger.bills: a stated
period's statement, else what closing it now would bill) and what its statements billed so
far, in the page's words and to the page's precision."""

from core.spreadsheet import fixed
from loans.maths import billing
from loans.services.ledger import bills
from loans.services.ledger.read import Ledger

NAME = "periods"
COLUMNS = (
    "period", "start", "end", "state", "committed_gpu_hours", "allocated_gpu_hours",
    "busy_gpu_hours", "corrected_gpu_hours", "past_commitment_gpu_hours",
    "overage_gpu_hours", "borrowed_gpu_hours", "lent_gpu_hours", "unused_gpu_hours",
    "committed_rate", "overage_rate", "committed_cost", "overage_cost", "sharing_cost",
    "upfront_fee", "total_cost", "saving", "billed_so_far", "currency", "completeness",
    "data_from",
)
STATES = {"closed": "stated", "ended": "awaiting statement", "open": "open"}
GPU_HOURS_PLACES, RATE_PLACES = 1, 4


def rows(ledger: Ledger) -> list[list]:
    """One row a started period, in COLUMNS' order."""
    zone = ledger.contract.zone
    out = []
    for row in ledger.entries:
        bill, currency = bills.of_entry(row), row.terms.currency
        places = -billing.minor_unit(currency).as_tuple().exponent
        out.append([
            row.period.index + 1, row.period.start.astimezone(zone).isoformat(),
            row.period.end.astimezone(zone).isoformat(), STATES[row.state],
            *(fixed(h, GPU_HOURS_PLACES) for h in (
                bill.committed_gpu_hours, bill.used_gpu_hours, row.busy_gpu_hours,
                row.corrected_gpu_hours, bill.past_commitment_gpu_hours,
                bill.overage_gpu_hours, bill.borrowed_gpu_hours, bill.lent_gpu_hours,
                bill.unused_gpu_hours)),
            fixed(row.terms.committed_rate, RATE_PLACES),
            fixed(row.terms.overage_rate, RATE_PLACES),
            *(fixed(m, places) for m in (
                bill.committed_cost, bill.overage_cost, bill.sharing_cost, bill.upfront_fee,
                bill.total, bill.saving, row.billed_money)),
            currency, "" if row.completeness is None else fixed(row.completeness, 3),
            "" if row.data_from is None else row.data_from.astimezone(zone).isoformat(),
        ])
    return out
