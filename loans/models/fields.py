"""Limits, defaults and validators the loans models share."""

import re
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pycountry
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator, validate_email
from django.utils.translation import gettext_lazy as _

from core.addresses import validate_public_url
from loans.maths import billing, guarantee

# A period can hold at most 31 days of the max quota; a commitment above that can never be met.
MAX_HOURS_PER_PERIOD = 31 * 24
MAX_TERM_MONTHS = 120

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    _("Use 1-50 lowercase letters, digits and hyphens, not starting or ending with a hyphen."),
)


def currency_validator(value: str) -> None:
    """A currency ISO 4217 lists (as iso-codes publishes it, through pycountry)."""
    if not (isinstance(value, str) and len(value) == 3 and value.isascii() and value.isupper()
            and pycountry.currencies.get(alpha_3=value) is not None):
        raise ValidationError(
            _("%(value)s is not an ISO 4217 currency code; use one such as CNY, USD or EUR."),
            params={"value": str(value)[:8]}, code="currency")


def default_currency() -> str:
    return settings.DEFAULT_CURRENCY


def default_time_zone() -> str:
    return settings.TIME_ZONE


def validate_time_zone(value: str) -> None:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            _("%(value)s is not an IANA time zone (e.g. Asia/Shanghai)."),
            params={"value": value},
        ) from None


def non_negative() -> list:
    return [MinValueValidator(0)]


def split_emails(value: str) -> list[str]:
    return [part.strip() for part in re.split(r"[,\s]+", value or "") if part.strip()]


def validate_emails(value: str) -> None:
    """Each address of a comma- or line-separated list, named when it is not one."""
    for address in split_emails(value):
        try:
            validate_email(address)
        except ValidationError:
            raise ValidationError(
                _("%(address)s is not an e-mail address."), params={"address": address[:80]},
                code="invalid",
            ) from None


def validate_webhook_url(url: str) -> None:
    """A webhook must point at a public address (core.addresses), checked when saved too."""
    validate_public_url(url)


def whole_minor_units(amount: Decimal | None, currency: str, field: str) -> None:
    """Refuse an amount finer than its currency's minor unit (a fee of 100.5 JPY), which no
    statement could bill."""
    if amount is None or not currency or not isinstance(amount, Decimal):
        return
    unit = billing.minor_unit(currency)
    if amount != amount.quantize(unit):
        raise ValidationError({field: _(
            "An amount in %(currency)s is a whole number of %(unit)s %(currency)s; "
            "%(amount)s is not.") % {"currency": currency, "unit": unit, "amount": amount}})


def tier_error(error: guarantee.TierError) -> str:
    """What is wrong with service-credit tiers, in the reader's language."""
    messages = {
        "format": _("%(part)s is not a tier written level:credit, such as 95:10."),
        "range": _("%(part)s: both percents must be above 0 and at most 100."),
        "same": _("Two tiers have the same level."),
        "order": _("A lower availability cannot earn a smaller credit."),
    }
    return str(messages[error.code]) % {"part": error.part[:40]}


def tiers_validator(value: str) -> None:
    """Service-credit tiers as loans.maths.guarantee.parse_tiers reads them."""
    try:
        guarantee.parse_tiers(value or "")
    except guarantee.TierError as error:
        raise ValidationError(tier_error(error)) from None
