"""CSV that a spreadsheet opens without running anything: a text cell that starts like a
formula (= + - @, or a tab or carriage return before one) is prefixed with an apostrophe, so
a plan named `=HYPERLINK(...)` is shown as text. Numbers are written as they are (a negative
amount is a number, not a formula)."""

import csv

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
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
