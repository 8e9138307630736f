"""The browsable API is for operators: its forms list related rows, and it renders for any
caller who asks for HTML. Outside DEBUG everyone else gets JSON (or CSV) only; asking for
`?format=api` then answers 404 and `Accept: text/html` alone 406."""

from django.conf import settings
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer

from loans.access import allowed


class OperatorsBrowse(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        if not settings.DEBUG and not allowed(request.user, "browse-api"):
            renderers = [r for r in renderers if not isinstance(r, BrowsableAPIRenderer)]
        return super().select_renderer(request, renderers, format_suffix)
