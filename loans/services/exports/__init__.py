"""Every file a finance team or a script loads from a contract's ledger, one module a format.

A format is a module with NAME (the file name's suffix and the key below), COLUMNS and
`rows(ledger)`: the rows of a ledger (loans.services.ledger.read.Ledger) in COLUMNS' order. The
API (loans.api.ledger), the pages (loans.web.views) and the CSV writer below all pick a format
from FORMATS, so a new format is one module here and one entry in FORMATS."""

import io
from types import ModuleType
from typing import IO

from core import spreadsheet
from loans.models import Contract
from loans.services.exports import focus, periods, statements
from loans.services.ledger.read import Ledger

FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (statements, focus, periods)}


def filename(contract: Contract, name: str) -> str:
    return f"{contract.tenant.slug}-contract-{contract.pk}-{name}.csv"


def table(name: str, ledger: Ledger) -> dict:
    """{"columns", "rows"} of format `name`, as the API's CSV renderers take them."""
    export = FORMATS[name]
    return {"columns": export.COLUMNS, "rows": export.rows(ledger)}


def write_csv(data: dict, out: IO[str]) -> None:
    """A table ({"columns", "rows"}) as CSV into `out`, formulas defused (core.spreadsheet)."""
    writer = spreadsheet.writer(out)
    writer.writerow(data["columns"])
    writer.writerows(data["rows"])


def csv_text(data: dict) -> str:
    out = io.StringIO()
    write_csv(data, out)
    return out.getvalue()
