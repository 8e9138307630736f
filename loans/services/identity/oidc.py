"""Single sign-on with OpenID Connect (mozilla-django-oidc does the code flow and checks the ID
token's signature, issuer, audience and nonce): a person is found by the provider's subject,
created at the first sign-in with an unusable password, and at every sign-in their groups
(OIDC_GROUPS_CLAIM) are applied to their memberships (loans.services.identity.directory).
A person deactivated here (the directory forgot them, or an operator) is not let in."""

import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from loans.models import DirectoryAccount
from loans.services.identity import directory

SOURCE = DirectoryAccount.Source.OIDC


class Backend(OIDCAuthenticationBackend):
    def get_userinfo(self, access_token, id_token, payload):
        """The userinfo endpoint's claims over the verified ID token's: Microsoft Entra ID, for
        one, puts the groups in the ID token only."""
        info = super().get_userinfo(access_token, id_token, payload)
        if info.get("sub") != payload.get("sub"):
            return {}  # a userinfo answer for someone else is no answer (verify_claims)
        return {**payload, **info}

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims):
        return get_user_model().objects.filter(
            directory_account__source=SOURCE, directory_account__subject=claims["sub"])

    def create_user(self, claims):
        user = get_user_model().objects.create_user(
            _free_username(claims), email=claims.get("email") or "", password=None)
        DirectoryAccount.objects.create(user=user, source=SOURCE, subject=claims["sub"])
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        if not user.is_active:
            return None
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        directory.apply(user.directory_account, [str(g) for g in groups],
                        directory.parse_roles(settings.DIRECTORY_GROUP_ROLES),
                        now=timezone.now())
        if claims.get("email") and user.email != claims["email"]:
            user.email = claims["email"]
            user.save(update_fields=["email"])
        return user

    def user_can_authenticate(self, user) -> bool:
        return user.is_active


def _free_username(claims) -> str:
    """The person's preferred name (or the e-mail's local part, or the subject), made a valid
    username, with a number where another person has it."""
    wanted = (claims.get("preferred_username") or (claims.get("email") or "").split("@")[0]
              or claims["sub"])
    base = re.sub(r"[^\w.@+-]", "-", str(wanted))[:140] or "user"
    users = get_user_model().objects
    name, k = base, 1
    while users.filter(username=name).exists():
        k += 1
        name = f"{base}-{k}"
    return name
