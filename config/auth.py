"""Login throttling: after LOGIN_FAILURES_ALLOWED failed attempts for one username from one
address within LOGIN_LOCKOUT_MINUTES, further attempts are refused without checking the
password until the window passes. Shared by the pages' login and the admin's."""

import hashlib

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _


def _key(request, username: str) -> str:
    address = request.META.get("REMOTE_ADDR", "") if request else ""
    digest = hashlib.sha256(f"{username.lower()}|{address}".encode()).hexdigest()
    return f"login-failures:{digest}"


class ThrottledLogin:
    """Mixin for Django's authentication forms."""

    def clean(self):
        username = self.data.get("username", "")[:150]
        key = _key(self.request, username)
        if cache.get(key, 0) >= settings.LOGIN_FAILURES_ALLOWED:
            raise ValidationError(
                _("Too many failed attempts. Try again in %(minutes)s minutes."),
                code="throttled", params={"minutes": settings.LOGIN_LOCKOUT_MINUTES})
        try:
            return super().clean()
        except ValidationError:
            try:
                cache.incr(key)
            except ValueError:  # first failure in the window
                cache.set(key, 1, settings.LOGIN_LOCKOUT_MINUTES * 60)
            raise


class LoginForm(ThrottledLogin, AuthenticationForm):
    pass


class AdminLoginForm(ThrottledLogin, AdminAuthenticationForm):
    pass
