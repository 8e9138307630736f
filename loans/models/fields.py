"""Limits, defaults and validators the loans models share."""

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.utils.translation import gettext_lazy as _

# A period can hold at most 31 days of the max quota; a commitment above that can never be met.
MAX_HOURS_PER_PERIOD = 31 * 24
MAX_TERM_MONTHS = 120

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    _("Use 1-50 lowercase letters, digits and hyphens, not starting or ending with a hyphen."),
)
currency_validator = RegexValidator(r"^[A-Z]{3}$", _("Use a three-letter ISO 4217 code, e.g. CNY."))


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
