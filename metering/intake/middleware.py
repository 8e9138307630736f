"""The agents' endpoint answered ahead of the middleware that only pages need."""

from django.http import HttpRequest, HttpResponse
from django.urls import resolve, reverse

from metering.intake import api


class AgentEndpointMiddleware:
    """POST /api/v1/samples carries a node's bearer token and JSON, never a session, a user, a
    language or a message, so it is answered here, before the session, locale, common, CSRF
    (the view is exempt anyway), authentication, messages and frame-options middleware. Those
    cost about a third of a millisecond a request in process, more under load, where agents
    post most. Place it after the middleware every request needs (security, request ids)."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.path = reverse("api-samples")
        self.match = resolve(self.path)  # for the request log's and metrics' route label

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info != self.path:
            return self.get_response(request)
        request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware would check it (DisallowedHost)
        request.resolver_match = self.match
        return api.samples(request)
