"""Number formats of the pages: GPU-hours, money, shares, and times in a contract's zone."""

import math
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from babel.numbers import format_decimal
from django import template
from django.core.exceptions import FieldDoesNotExist
from django.utils.translation import get_language, to_locale

from loans.maths.billing import minor_unit
from loans.maths.billing import money as in_minor_units

register = template.Library()
DASH = "–"


@register.filter
def gpuh(value: Decimal | float | None, places: int = 1) -> str:
    """1234.5678 -> "1,234.6"."""
    if value is None or value == "":
        return DASH
    return f"{float(value):,.{int(places)}f}"


@register.filter
def money(value: Decimal | None, currency: str = "") -> str:
    """Decimal(11200) with "CNY" -> "11,200.00 CNY"; with "JPY" -> "11,200 JPY"; "0.038 KWD":
    to the currency's minor unit, in the page's language's number format (CLDR's, through
    Babel). Without a currency (a price per GPU-hour), two places."""
    if value is None or value == "":
        return DASH
    places = -minor_unit(currency).as_tuple().exponent if currency else 2
    amount = in_minor_units(Decimal(value), currency) if currency else Decimal(value)
    pattern = "#,##0" + ("." + "0" * places if places else "")
    text = format_decimal(amount, format=pattern, locale=to_locale(get_language() or "en"))
    return f"{text} {currency}".rstrip()


@register.filter
def amount(value: Decimal | None, currency: str) -> str:
    """money() to the currency's minor unit without its code (a card names it apart):
    "92,145.00" for CNY, "11,200" for JPY."""
    text = money(value, currency)
    return text[: -len(currency)].rstrip() if currency and text.endswith(currency) else text


@register.filter
def figure(value: str | None) -> str:
    """A recommendation's current or recommended value: "12000" -> "12,000"; a plan's name
    as it is."""
    if value is None or value == "":
        return DASH
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return value
    if not number.is_finite():
        return value
    return f"{number:,f}"


@register.filter
def share(value: Decimal | float | None) -> str:
    """0.456 -> "45.6%"."""
    if value is None or value == "":
        return DASH
    return f"{float(value) * 100:.1f}%"


@register.filter
def credited(value: Decimal | None, currency: str = "") -> str:
    """A credit (a negative line) as a sentence says it: the amount credited, 100.00 CNY."""
    return money(None if value is None else -value, currency)


@register.filter
def availability(value: Decimal | float | None) -> str:
    """A share of time to two places, rounded down: 0.999 97 reads "99.99%", never "100%"
    while any second was short (a guarantee of 99.9% is read against it)."""
    if value is None or value == "":
        return DASH
    return f"{math.floor(Decimal(str(value)) * 10000) / 100:.2f}%"


@register.filter
def percent(value: Decimal | None) -> str:
    """A stored percent as people write it: 95.00 -> "95%", 99.90 -> "99.9%"."""
    if value is None or value == "":
        return DASH
    return f"{Decimal(value).normalize():f}%"


@register.filter
def in_zone(value: datetime | None, zone: ZoneInfo | str) -> str:
    """A moment as wall-clock time in the contract's zone, to the minute."""
    if value is None:
        return DASH
    zone = ZoneInfo(zone) if isinstance(zone, str) else zone
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M")


@register.filter
def day_in_zone(value: datetime | None, zone: ZoneInfo | str) -> str:
    if value is None:
        return DASH
    zone = ZoneInfo(zone) if isinstance(zone, str) else zone
    return value.astimezone(zone).strftime("%Y-%m-%d")


@register.filter
def last_day_in_zone(value: datetime | None, zone: ZoneInfo | str) -> str:
    """The local day a period ending at `value` (exclusive) ends on: a period to 2026-11-16
    00:00 ends on 2026-11-15, as the period picker says."""
    if value is None:
        return DASH
    zone = ZoneInfo(zone) if isinstance(zone, str) else zone
    return (value.astimezone(zone) - timedelta(microseconds=1)).strftime("%Y-%m-%d")


@register.simple_tag
def term_name(name: str) -> str:
    """A contract term's name as people read it, in their language."""
    from loans.models import Contract

    try:
        return str(Contract._meta.get_field(name).verbose_name)
    except FieldDoesNotExist:
        return name
