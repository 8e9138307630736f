"""The NUL character is refused at the door. PostgreSQL can neither store nor compare text
that holds it, so a `%00` in an address or a query, or a `\\u0000` in a JSON body, would
otherwise reach a lookup and end as a server error. Forms need nothing here: Django's text
fields already refuse it."""

from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

NUL = "\x00"


def message() -> str:
    return _("Text may not contain the NUL character (\\u0000).")


def holds_nul(value) -> bool:
    """Whether a parsed JSON value holds NUL in any string, key or value, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class TextJSONParser(JSONParser):
    """DRF's JSON parser, refusing a body that holds NUL anywhere with 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if holds_nul(data):
            raise ParseError(message())
        return data


def _query_holds_nul(query: QueryDict) -> bool:
    return any(NUL in key or any(NUL in value for value in values)
               for key, values in query.lists())


class RefuseNul:
    """400 for a request whose path or query string holds NUL: JSON under /api/, text elsewhere."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if NUL in request.path or _query_holds_nul(request.GET):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message()}, status=400)
            return HttpResponse(message(), status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
