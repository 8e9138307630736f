"""A contract's statements in the FinOps FOCUS 1.2 columns (docs/statements.md lists them), one
row per charge of loans.services.exports.lines. Nothing is priced here, except that a period's
committed cost is split into its used and unused parts, which add up to it to the cent."""

from datetime import datetime
from decimal import Decimal

from django.conf import settings

from loans.maths import billing
from loans.models import Contract, CorrectionLine, SharingLine, Statement
from loans.services.exports.lines import UNIT, Line, lines
from loans.services.ledger.read import Ledger

ZERO = Decimal(0)


# FOCUS 1.2 columns this export fills (docs/statements.md says what each holds).
NAME = "focus"
COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType",
    "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory",
    "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd",
    "ChargePeriodStart", "CommitmentDiscountCategory", "CommitmentDiscountId",
    "CommitmentDiscountName", "CommitmentDiscountQuantity", "CommitmentDiscountStatus",
    "CommitmentDiscountType", "CommitmentDiscountUnit", "ConsumedQuantity", "ConsumedUnit",
    "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "InvoiceId", "InvoiceIssuerName",
    "ListCost", "ListUnitPrice", "PricingCategory", "PricingCurrency", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
    "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceDetails", "SkuPriceId", "SubAccountId",
    "SubAccountName", "SubAccountType",
)
METER = "GPU time"


def _utc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def focus_rows(ledger: Ledger, issuer: str) -> list[dict]:
    """One row per charge, as DESIGN's FOCUS mapping has it. A period's commitment is a
    Purchase (billed, no effective cost); the usage it covers is Usage rows that bill nothing
    and carry its effective cost, split into the part drawn on (Used) and the rest (Unused);
    overage is Usage at the standard (overage) price; a correction is ChargeClass Correction,
    its charge period the period it corrects, billed in the statement that carries it. Per
    statement, BilledCost and EffectiveCost each add up to its total."""
    contract = ledger.contract
    out = []
    for s in ledger.statements:
        billed_in = billing_period(s, contract)
        plan = s.plan_name or contract.plan.name  # as it was named when stated
        base = {
            **{c: "" for c in COLUMNS},
            "BillingAccountId": contract.tenant.slug, "BillingAccountName": contract.tenant.name,
            "BillingAccountType": "Tenant", "BillingCurrency": s.currency,
            "BillingPeriodStart": _utc(billed_in.start), "BillingPeriodEnd": _utc(billed_in.end),
            "InvoiceId": f"{contract.pk}-{s.number}", "InvoiceIssuerName": issuer,
            "PricingCurrency": s.currency, "ProviderName": issuer,
            "PublisherName": issuer, "ServiceCategory": "Compute", "ServiceName": "GPU loan",
            "ServiceSubcategory": "Other (Compute)", "SkuId": f"plan-{contract.plan_id}",
            "SkuMeter": METER, "SubAccountId": f"contract-{contract.pk}",
            "SubAccountName": plan, "SubAccountType": "Contract",
            "PricingUnit": UNIT,
        }
        commitment = {"CommitmentDiscountCategory": "Usage",
                      "CommitmentDiscountId": f"contract-{contract.pk}",
                      "CommitmentDiscountName": f"{contract.tenant.slug} / {plan}",
                      "CommitmentDiscountType": "GPU loan", "CommitmentDiscountUnit": UNIT}
        for line in lines(s):
            period = line.charge_period
            row = {**base, "ChargePeriodStart": _utc(period.start),
                   "ChargePeriodEnd": _utc(period.end)}
            if line.kind == "upfront_fee":
                out += _fee_rows(row, s, line, contract.plan_id)
            elif line.kind == "commitment":
                out += _commitment_rows(row, commitment, s, contract.plan_id)
            elif line.kind == "overage":
                if line.gpu_hours or line.amount:
                    out.append(_overage_row(row, s, line, contract.plan_id))
            elif line.kind in ("borrowed", "lent"):
                out.append(_shared_row(row, s, line, contract.plan_id))
            elif line.kind == "credit":
                out.append(_credit_row(row, s, line.amount, contract.plan_id,
                                       f"Service credit, period {s.number}: availability "
                                       f"{_percent(s.availability)} against a guarantee of "
                                       f"{s.guarantee_pct}%, {s.credit_pct}% of the committed "
                                       f"cost"))
            else:
                out += _correction_rows(row, commitment, s, line.corrects, contract.plan_id)
    return out


def billing_period(s: Statement, contract: Contract) -> billing.Period:
    """The month a statement bills in: a period statement's own period; a corrections
    statement (after the contract's last period) the anniversary month it was written in, so a
    correction that reached the meter on May 4 is not billed in April."""
    if s.kind == Statement.Kind.PERIOD:
        return s.period
    index = s.period_index
    while True:
        month = billing.period_of(contract.starts_on, index, contract.zone)
        if s.closed_at < month.end:
            return month
        index += 1


def _number(value: Decimal) -> str:
    """A figure as FOCUS reads it: plain digits, a minus sign where negative."""
    return format(value, "f")


def _price(plan_id: int, kind: str) -> dict:
    return {"SkuPriceId": f"plan-{plan_id}-{kind}",
            "SkuPriceDetails": f'{{"x_Rate": "{kind}"}}'}


def _priced(hours: Decimal, contracted: Decimal, listed: Decimal, currency: str) -> dict:
    return {"PricingQuantity": _number(hours), "ContractedUnitPrice": _number(contracted),
            "ContractedCost": _money(hours * contracted, currency),
            "ListUnitPrice": _number(listed), "ListCost": _money(hours * listed, currency)}


def _money(amount: Decimal, currency: str) -> str:
    """An amount to its currency's minor unit (1360.00 CNY, 0.038 KWD), written with a decimal
    point even where the currency has no minor unit (124.0 JPY): cost columns are decimal
    numbers, and a reader that infers types from the text would take a column of whole yen
    for integers (the Foundation's validator does, and fails it)."""
    value = billing.money(amount, currency)
    return _number(value) if value.as_tuple().exponent < 0 else f"{value:.1f}"


def _commitment_rows(row: dict, commitment: dict, s: Statement, plan_id: int) -> list[dict]:
    """The commitment as a Purchase, and the Usage it covers: the share the period's usage
    drew on (Used) and the rest (Unused), whose effective costs add up to the purchase."""
    committed, used = s.committed_gpu_hours, min(s.allocated_gpu_hours, s.committed_gpu_hours)
    out = []
    if committed or s.committed_cost:
        out.append({
            **row, **commitment, **_price(plan_id, "committed"),
            **_priced(committed, s.committed_rate, s.committed_rate, s.currency),
            "ChargeCategory": "Purchase", "ChargeFrequency": "Recurring",
            "PricingCategory": "Committed", "BilledCost": _money(s.committed_cost, s.currency),
            "EffectiveCost": _money(ZERO, s.currency),
            "CommitmentDiscountQuantity": _number(committed),
            "ChargeDescription": (f"Commitment, period {s.number}: {committed} GPU-hours at "
                                  f"{s.committed_rate}"),
        })
    used_cost = (billing.money(s.committed_cost * used / committed, s.currency) if committed > 0
                 else ZERO)
    for status, hours, cost in (("Used", used, used_cost),
                                ("Unused", committed - used, s.committed_cost - used_cost)):
        if hours or cost:
            out.append(_covered(row, commitment, s, plan_id, status, hours, cost,
                                f"Committed GPU-hours, period {s.number}, {status.lower()}: "
                                f"{hours} of {committed}"))
    return out


def _covered(row: dict, commitment: dict, s: Statement, plan_id: int, status: str,
             hours: Decimal, cost: Decimal, description: str, correction: bool = False) -> dict:
    """Usage the commitment covers: billed by the purchase, its effective cost here."""
    return {
        **row, **commitment, **_price(plan_id, "committed"),
        **_priced(hours, s.committed_rate, s.overage_rate, s.currency),
        "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based",
        "ChargeClass": "Correction" if correction else "", "PricingCategory": "Committed",
        "BilledCost": _money(ZERO, s.currency), "EffectiveCost": _money(cost, s.currency),
        "CommitmentDiscountStatus": status,
        # A correction's quantity is the change (negative where hours leave Unused), so a tool
        # that adds up Used and Unused quantities reads the corrected period's split.
        "CommitmentDiscountQuantity": _number(hours),
        **({"ConsumedQuantity": _number(hours), "ConsumedUnit": UNIT}
           if status == "Used" else {}),
        "ChargeDescription": description,
    }


def _fee_rows(row: dict, s: Statement, line: Line, plan_id: int) -> list[dict]:
    """The upfront fee: a one-time Purchase (billed, no effective cost, as FOCUS has every
    purchase), and its cost taken in full in the period it is billed with (a Usage row billed
    0): the statement's BilledCost and EffectiveCost both count it once."""
    fee = _money(line.amount, s.currency)
    common = {**row, **_price(plan_id, "upfront-fee"),
              **_priced(Decimal(1), line.amount, line.amount, s.currency),
              "PricingUnit": "Fee", "ChargeFrequency": "One-Time", "PricingCategory": "Standard"}
    return [
        {**common, "ChargeCategory": "Purchase", "BilledCost": fee,
         "EffectiveCost": _money(ZERO, s.currency),
         "ChargeDescription": f"Upfront fee of the contract, billed with period {s.number}"},
        {**common, "ChargeCategory": "Usage", "BilledCost": _money(ZERO, s.currency),
         "EffectiveCost": fee,
         # "1.0", not "1": where it is the column's only value, a reader that infers types
         # from the text takes "1" for an integer (as _money writes whole yen).
         "ConsumedQuantity": "1.0", "ConsumedUnit": "Fee",
         "ChargeDescription": f"Upfront fee of the contract, taken in period {s.number}"},
    ]


def _overage_row(row: dict, s: Statement, line: Line, plan_id: int) -> dict:
    return {
        **row, **_price(plan_id, "overage"),
        **_priced(line.gpu_hours, line.rate, line.rate, s.currency),
        "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based",
        "PricingCategory": "Standard", "BilledCost": _money(line.amount, s.currency),
        "EffectiveCost": _money(line.amount, s.currency),
        "ConsumedQuantity": _number(line.gpu_hours), "ConsumedUnit": UNIT,
        "ChargeDescription": (f"Overage above the commitment, period {s.number}: "
                              f"{line.gpu_hours} GPU-hours at {line.rate}"),
    }


def _correction_rows(row: dict, commitment: dict, s: Statement, c: CorrectionLine,
                     plan_id: int) -> list[dict]:
    """A correction of an earlier period: the late hours the commitment covers move from its
    Unused part to its Used part (no money billed, the effective cost moves with them), and
    the change in overage is billed at the overage rate that period had."""
    corrected = c.corrected
    committed = c.committed_gpu_hours
    before, after = min(c.billed_gpu_hours, committed), min(c.billed_after_gpu_hours, committed)
    out = []
    if after != before and committed > 0:
        moved = billing.money(corrected.committed_cost * (after - before) / committed,
                              s.currency)
        word = f"Correction of period {c.period_index + 1}"
        out += [
            _covered(row, commitment, corrected, plan_id, "Used", after - before, moved,
                     f"{word}: {after - before} more committed GPU-hours used",
                     correction=True),
            _covered(row, commitment, corrected, plan_id, "Unused", before - after, -moved,
                     f"{word}: {after - before} fewer committed GPU-hours unused",
                     correction=True)]
    change = c.overage_after_gpu_hours - c.overage_before_gpu_hours
    overage = c.overage_after_cost - c.overage_before_cost
    if change or overage:
        out.append({
            **row, **_price(plan_id, "overage"),
            **_priced(change, c.overage_rate, c.overage_rate, s.currency),
            "ContractedCost": _money(overage, s.currency),
            "ListCost": _money(overage, s.currency),
            "ChargeCategory": "Usage", "ChargeClass": "Correction",
            "ChargeFrequency": "Usage-Based", "PricingCategory": "Standard",
            "BilledCost": _money(overage, s.currency),
            "EffectiveCost": _money(overage, s.currency),
            "ConsumedQuantity": _number(change), "ConsumedUnit": UNIT,
            "ChargeDescription": (
                f"Correction of period {c.period_index + 1}: {c.gpu_hours} GPU-hours changed; "
                f"overage {c.overage_before_gpu_hours} -> {c.overage_after_gpu_hours} GPU-hours "
                f"at {c.overage_rate}"),
        })
    shared = c.sharing_after_cost - c.sharing_before_cost
    if shared:
        out.append({
            **row, **_price(plan_id, "sharing"),
            "ChargeCategory": "Adjustment", "ChargeClass": "Correction",
            "ChargeFrequency": "Usage-Based", "PricingCategory": "", "PricingUnit": "",
            "BilledCost": _money(shared, s.currency), "EffectiveCost": _money(shared, s.currency),
            "ContractedCost": _money(shared, s.currency), "ListCost": _money(shared, s.currency),
            "ChargeDescription": (
                f"Correction of period {c.period_index + 1}: the group's sharing re-run at the "
                f"usage now metered: borrowed less lent {c.sharing_before_cost} -> "
                f"{c.sharing_after_cost}"),
        })
    credited = c.credit_after_cost - c.credit_before_cost
    if credited:
        out.append(_credit_row(
            row, s, credited, plan_id,
            f"Correction of period {c.period_index + 1}: its service credit at the waits the "
            f"schedulers reported since: {c.credit_before_cost} -> {c.credit_after_cost}",
            correction=True))
    return out


def _percent(share: Decimal | None) -> str:
    return "unmeasured" if share is None else f"{share * 100:.4f}%"


def _credit_row(row: dict, s: Statement, amount: Decimal, plan_id: int, description: str,
                correction: bool = False) -> dict:
    """A service credit for availability below the guarantee's tiers (DESIGN "The floor"):
    a Credit, negative in both costs."""
    money = _money(amount, s.currency)
    return {
        **row, **_price(plan_id, "service-credit"),
        "ChargeCategory": "Credit", "ChargeClass": "Correction" if correction else "",
        "ChargeFrequency": "Usage-Based", "PricingCategory": "", "PricingUnit": "",
        "BilledCost": money, "EffectiveCost": money, "ContractedCost": money, "ListCost": money,
        "ChargeDescription": description,
    }


def _shared_row(row: dict, s: Statement, line: Line, plan_id: int) -> dict:
    """Committed GPU-hours borrowed from a partner in the group: usage its commitment covers,
    under the lender's CommitmentDiscountId, billed at the lender's committed rate; or those
    lent to a partner: a Credit to this contract at its committed rate."""
    x = line.shares
    other = x.counterpart
    amount = _money(line.amount, s.currency)
    if x.kind == SharingLine.Kind.BORROWED:
        return {
            **row, **_price(plan_id, "borrowed"),
            **_priced(line.gpu_hours, line.rate, s.overage_rate, s.currency),
            "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based",
            "PricingCategory": "Committed", "BilledCost": amount, "EffectiveCost": amount,
            "CommitmentDiscountCategory": "Usage",
            "CommitmentDiscountId": f"contract-{other.pk}",
            "CommitmentDiscountName": f"{other.tenant.slug} / {x.group.name}",
            "CommitmentDiscountType": "GPU loan", "CommitmentDiscountUnit": UNIT,
            "CommitmentDiscountStatus": "Used",
            "CommitmentDiscountQuantity": _number(line.gpu_hours),
            "ConsumedQuantity": _number(line.gpu_hours), "ConsumedUnit": UNIT,
            "ChargeDescription": (f"Committed GPU-hours borrowed from {other.tenant.name} in "
                                  f"{x.group.name}, period {s.number}: {line.gpu_hours} at "
                                  f"{line.rate}"),
        }
    return {
        **row, **_price(plan_id, "lent"),
        "ChargeCategory": "Credit", "ChargeFrequency": "Usage-Based",
        "PricingCategory": "", "PricingUnit": "", "BilledCost": amount, "EffectiveCost": amount,
        "ContractedCost": amount, "ListCost": amount,
        "ChargeDescription": (f"Credit for committed GPU-hours lent to {other.tenant.name} in "
                              f"{x.group.name}, period {s.number}: {line.gpu_hours} at "
                              f"{line.rate}"),
    }


def rows(ledger: Ledger) -> list[list]:
    """focus_rows in COLUMNS' order, the invoices issued in the name settings give."""
    return [[row[c] for c in COLUMNS] for row in focus_rows(ledger, settings.INVOICE_ISSUER)]
