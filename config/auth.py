"""Login throttling, by django-axes: after LOGIN_FAILURES_ALLOWED failed attempts for one
username from one client address within LOGIN_LOCKOUT_MINUTES, further attempts are refused
(429) without checking the password until the window passes. Axes keeps the counts in the
database, so every worker shares them; the pages' login, the admin's and the password change
form all go through it. The username is counted as Django reads it (NFKC, as
AbstractBaseUser.normalize_username), so `ｒecsys-member` in fullwidth letters is the same
user, and the address is the client's behind a trusted proxy (core.clientip).

Axes counts per username and address, so many addresses could go on guessing one account's
password. Past LOGIN_ACCOUNT_FAILURES_PER_HOUR failures for one username in an hour, from
any addresses, that username is slowed, not locked: one attempt every
LOGIN_ACCOUNT_SLOW_SECONDS is checked, the others refused without looking at the password,
so guessing crawls while the account's owner still logs in after a short wait. An address
that has logged in to the account before (in the last KNOWN_DAYS, as Axes' access log keeps
it: a "known device") is let through to the password check at once: the owner is not crowded
out by an attacker holding the one slot; Axes' own per-address lockout still holds there."""

import time
import unicodedata
from datetime import timedelta

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import authenticate
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.dispatch import receiver
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.clientip import client_ip  # AXES_CLIENT_IP_CALLABLE too

KNOWN_DAYS = 90


def username_of(request, credentials: dict) -> str:
    """AXES_USERNAME_CALLABLE: the name as the login form will look it up."""
    raw = (credentials or {}).get("username") or ""
    return unicodedata.normalize("NFKC", str(raw))[:150]


def locked_out(request, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the paused login, said in the page's language (429)."""
    return render(request, "registration/locked_out.html", {
        "lockout_minutes": settings.LOGIN_LOCKOUT_MINUTES,
        "failure_limit": settings.AXES_FAILURE_LIMIT}, status=429)


def _failures_key(username: str) -> str:
    return f"login-failures:{username}:{int(time.time() // 3600)}"


@receiver(user_login_failed)
def _count_failure(sender, credentials: dict, request=None, **kwargs) -> None:
    if request is not None and getattr(request, "login_slowed", None):
        return  # refused unchecked: not a guess that was tried
    key = _failures_key(username_of(request, credentials))
    cache.add(key, 0, timeout=7200)
    cache.incr(key)


class AccountCeilingBackend:
    """Before the password backend: refuses, unchecked, an attempt on a username
    that is past its hourly ceiling of failures and was tried less than
    LOGIN_ACCOUNT_SLOW_SECONDS ago; otherwise lets the next backends decide."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        limit = settings.LOGIN_ACCOUNT_FAILURES_PER_HOUR
        name = username_of(request, {"username": username})
        if not limit or not name or (cache.get(_failures_key(name)) or 0) < limit:
            return None
        if request is not None and _known_address(name, client_ip(request)):
            return None  # the owner's address: checked, as Axes limits it
        gap = settings.LOGIN_ACCOUNT_SLOW_SECONDS
        if cache.add(f"login-slow:{name}", 1, timeout=gap):
            return None  # the one attempt of this gap is checked
        if request is not None:
            request.login_slowed = gap
        raise PermissionDenied  # it never logs anyone in, so it has no get_user


class LocalPasswordBackend(ModelBackend):
    """Django's password check, for the usernames LOCAL_LOGIN_USERS names where it names any
    (break-glass operators, when everyone else signs in with the organisation's identity); a
    refused name fails like a wrong password, and is counted by the throttles alike."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        allowed = settings.LOCAL_LOGIN_USERS
        if allowed and username_of(request, {"username": username}) not in allowed:
            if request is not None:
                request.local_login_refused = True
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def _known_address(username: str, address: str) -> bool:
    """Whether this address logged in to this account in the last KNOWN_DAYS."""
    from axes.models import AccessLog

    since = timezone.now() - timedelta(days=KNOWN_DAYS)
    return AccessLog.objects.filter(username=username, ip_address=address,
                                    attempt_time__gte=since).exists()


class SlowedAuthenticationForm(AuthenticationForm):
    """The login form, saying so when the attempt was refused unchecked (AccountCeilingBackend)
    rather than calling the password wrong."""

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            seconds = getattr(self.request, "login_slowed", None)
            if seconds:
                raise ValidationError(_(
                    "This account had too many failed logins in the last hour; only one try "
                    "every %(seconds)s seconds is checked. Wait a moment and try again."),
                    code="slowed", params={"seconds": seconds}) from None
            if getattr(self.request, "local_login_refused", False):
                raise ValidationError(_(
                    "Passwords here are only for the named break-glass operators; sign in "
                    "with your organisation's account."), code="local_refused") from None
            raise


class SlowedAdminAuthenticationForm(SlowedAuthenticationForm, AdminAuthenticationForm):
    """The admin's login form (staff only), saying so too."""


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


class SignInView(LoginView):
    """The login page: the single sign-on's button where it is configured, and a word when
    the provider's answer did not sign the person in."""

    authentication_form = SlowedAuthenticationForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        configured = bool(settings.OIDC_RP_CLIENT_ID)
        context["sso_name"] = settings.OIDC_PROVIDER_NAME if configured else None
        context["sso_failed"] = configured and self.request.GET.get("sso") == "failed"
        return context
