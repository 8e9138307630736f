"""Login throttling, by django-axes: after LOGIN_FAILURES_ALLOWED failed attempts for one
username from one client address within LOGIN_LOCKOUT_MINUTES, further attempts are refused
(429) without checking the password until the window passes. Axes keeps the counts in the
database, so every worker shares them; the pages' login, the admin's and the password change
form all go through it. The username is counted as Django reads it (NFKC, as
AbstractBaseUser.normalize_username), so `ｒecsys-member` in fullwidth letters is the same
user, and the address is the client's behind a trusted proxy (core.clientip)."""

import unicodedata

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render

from core.clientip import client_ip  # noqa: F401 - AXES_CLIENT_IP_CALLABLE


def username_of(request, credentials: dict) -> str:
    """AXES_USERNAME_CALLABLE: the name as the login form will look it up."""
    raw = (credentials or {}).get("username") or ""
    return unicodedata.normalize("NFKC", str(raw))[:150]


def locked_out(request, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the paused login, said in the page's language (429)."""
    return render(request, "registration/locked_out.html", {
        "lockout_minutes": settings.LOGIN_LOCKOUT_MINUTES,
        "failure_limit": settings.AXES_FAILURE_LIMIT}, status=429)


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """The old password is checked through authenticate(), so wrong guesses count towards
    the same lockout as the login's (a stolen session cannot try passwords freely)."""

    def __init__(self, user, *args, request=None, **kwargs):
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self) -> str:
        old = self.cleaned_data["old_password"]
        if authenticate(self.request, username=self.user.get_username(), password=old) is None:
            raise ValidationError(self.error_messages["password_incorrect"],
                                  code="password_incorrect")
        return old


class ThrottledPasswordChangeView(PasswordChangeView):
    form_class = ThrottledPasswordChangeForm

    def get_form_kwargs(self) -> dict:
        return {**super().get_form_kwargs(), "request": self.request}
