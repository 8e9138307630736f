"""The single sign-on's two pages, the start (off to the provider) and the provider's answer,
and the middleware that sends a signed-in person back to it now and then. They are
mozilla-django-oidc's, answering 404 where single sign-on is not configured, and a page that
says so, not a server error, when the provider cannot be reached."""

import logging

import requests
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from mozilla_django_oidc.middleware import SessionRefresh
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

log = logging.getLogger(__name__)


def _configured() -> None:
    if not settings.OIDC_RP_CLIENT_ID:
        raise Http404("Single sign-on is not configured.")


def start(request: HttpRequest) -> HttpResponse:
    _configured()
    return OIDCAuthenticationRequestView.as_view()(request)


def callback(request: HttpRequest) -> HttpResponse:
    _configured()
    try:
        return OIDCAuthenticationCallbackView.as_view()(request)
    except (requests.RequestException, ValueError) as error:
        log.warning("single sign-on: the provider could not be reached: %s", error)
        return render(request, "registration/sso_unreachable.html", {
            "provider": settings.OIDC_PROVIDER_NAME}, status=503)


class RefreshMiddleware:
    """Where single sign-on is configured, a person signed in with it is sent back to the
    provider (without a prompt) every OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS, so that their groups
    are applied again and a person the provider no longer lets in is signed out: mozilla-
    django-oidc's SessionRefresh, read from the settings at each request (it needs them all)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.OIDC_RP_CLIENT_ID:
            answer = SessionRefresh(self.get_response).process_request(request)
            if answer is not None:
                return answer
        return self.get_response(request)
