"""CSV that a spreadsheet opens without running anything: a text cell that starts like a
formula (= + - @, or a tab or carriage return before one) is prefixed with an apostrophe, so
a plan named `=HYPERLINK(...)` is shown as text; so is each part of a cell after a semicolon
that starts like one, since spreadsheets in locales whose list separator is the semicolon
split `x;=cmd|...` into two cells. Numbers stay numbers, whether given as numbers or as the
text of one (`-600.00`, what exports write for a negative amount): a spreadsheet reads them
as numbers and runs nothing."""

import csv
import re
from decimal import ROUND_HALF_UP, Decimal

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
AFTER_SEMICOLON = re.compile(r";([\s\"']*)(?=[=+\-@])")


def neutral(value):
    if not isinstance(value, str) or NUMBER.fullmatch(value):
        return value
    if ";" in value:
        value = AFTER_SEMICOLON.sub(r";\1'", value)
    if value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeWriter:
    """csv.writer's writerow and writerows, with every text cell neutralised."""

    def __init__(self, out):
        self._writer = csv.writer(out)

    def writerow(self, row) -> None:
        self._writer.writerow([neutral(cell) for cell in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def writer(out) -> SafeWriter:
    return SafeWriter(out)


def fixed(value, places: int) -> str:
    """A number with exactly `places` decimals (half up), never in exponent form; empty for
    none: every cell of a column at the column's one precision."""
    if value is None or value == "":
        return ""
    step = Decimal(1).scaleb(-places)
    return f"{Decimal(str(value)).quantize(step, rounding=ROUND_HALF_UP):f}"
