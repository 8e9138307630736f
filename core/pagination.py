"""List endpoints' pages: `limit` (default 100, at most API_MAX_PAGE_SIZE) and `offset`. A
value that is not a whole number in range is refused with 400 naming the parameter, instead
of being ignored (DRF's default) or reaching the database as an out-of-range OFFSET."""

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

from core.bounds import whole_number

MAX_OFFSET = 10**9


def _whole(request, name: str, least: int, most: int, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    value = whole_number(raw, least, most, digits=10)
    if value is None:
        raise ValidationError({name: [_("Use a whole number from %(least)s to %(most)s.")
                                      % {"least": least, "most": f"{most:,}"}]})
    return value


class CappedPages(LimitOffsetPagination):
    def get_limit(self, request) -> int:
        return _whole(request, self.limit_query_param, 1, settings.API_MAX_PAGE_SIZE,
                      self.default_limit)

    def get_offset(self, request) -> int:
        return _whole(request, self.offset_query_param, 0, MAX_OFFSET, 0)
