"""The bounds a query parameter is read within, one place for every app: the days a date may
name (wide enough for any contract, narrow enough that every zone's midnight and every period
arithmetic stays inside Python's datetime), and whole numbers read without overflow or
non-ASCII digits."""

from datetime import date

FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2999, 12, 31)


def day_in_range(day: date) -> bool:
    return FIRST_DAY <= day <= LAST_DAY


def whole_number(raw: str, least: int, most: int, *, digits: int = 18) -> int | None:
    """`raw` as an int when it is at most `digits` ASCII digits and within [least, most];
    None otherwise."""
    if raw.isascii() and raw.isdigit() and len(raw) <= digits and least <= int(raw) <= most:
        return int(raw)
    return None
