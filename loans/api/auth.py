"""`Authorization: Bearer gplu_...` for people's API tokens (loans.models.ApiToken): an
expired one is refused (401), and a read-scoped one is refused every write (403), whatever
the view's own permissions."""

import hmac

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions, permissions

from core import audit
from core.bearer import bearer_token, hash_token
from loans.models.tokens import API_TOKEN_PREFIX, LAST_USED_EVERY, ApiToken


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer gplu_...`; anything else is left to the other authenticators."""

    def authenticate(self, request):
        token = bearer_token(request.headers.get("Authorization", ""))
        if token is None or not token.startswith(API_TOKEN_PREFIX):
            return None
        digest = hash_token(token)
        record = ApiToken.objects.select_related("user").filter(token_hash=digest).first()
        if record is None or not hmac.compare_digest(record.token_hash, digest):
            raise exceptions.AuthenticationFailed(_("Unknown or revoked API token."))
        if not record.user.is_active:
            raise exceptions.AuthenticationFailed(_("This token's user is inactive."))
        now = timezone.now()
        if record.expired(now):
            raise exceptions.AuthenticationFailed(
                _("This API token expired on %(day)s; ask for a new one.")
                % {"day": f"{record.expires_at:%Y-%m-%d %H:%M} UTC"})
        if not record.writes and request.method not in permissions.SAFE_METHODS:
            raise exceptions.PermissionDenied(
                _("This token's scope is read: it may not %(method)s. Use a token with the "
                  "read write scope.") % {"method": request.method})
        last = record.last_used_at
        if last is None or (now - last).total_seconds() > LAST_USED_EVERY:
            ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
        audit.note_token(record)  # its writes name the token and its owner
        return record.user, record

    def authenticate_header(self, request) -> str:
        return "Bearer"
