"""Logins against the organisation's LDAP directory (django-auth-ldap: bind as the person,
user and group searches): a person is created at the first login with an unusable password,
and at every login, and in the hourly sync, their groups' names are applied to their
memberships (loans.services.identity.directory). A local account of the same name is never
taken over. The sync deactivates, with their tokens, the people the directory no longer
holds; it changes nothing when the directory cannot be reached."""

from dataclasses import dataclass
from datetime import datetime

import ldap
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from django_auth_ldap.backend import LDAPBackend

from loans.models import DirectoryAccount
from loans.services.identity import directory

SOURCE = DirectoryAccount.Source.LDAP


class DirectoryUnreachable(Exception):
    pass


class Backend(LDAPBackend):
    def get_or_build_user(self, username, ldap_user):
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and not DirectoryAccount.objects.filter(user=user, source=SOURCE).exists():
            # Someone made here (a local account, or one of the single sign-on) is theirs,
            # whatever the directory holds under the same name.
            raise PermissionDenied
        return user, built

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None or not user.is_active:
            return None
        _apply(user, ldap_user.dn, ldap_user.group_names, timezone.now())
        return user


def _apply(user, dn: str, groups, now: datetime) -> directory.Applied:
    account, _created = DirectoryAccount.objects.get_or_create(
        user=user, defaults={"source": SOURCE, "subject": dn})
    return directory.apply(account, sorted(groups), directory.parse_roles(
        settings.DIRECTORY_GROUP_ROLES), now=now)


@dataclass(frozen=True)
class Synced:
    people: int
    changed: int  # whose memberships changed
    forgotten: int  # no longer in the directory: deactivated, tokens revoked


def sync(now: datetime) -> Synced:
    """Every directory person's groups read again with the service account; those the
    directory no longer holds are forgotten. DirectoryUnreachable, with nothing changed,
    when it cannot be reached or refuses the service account."""
    try:
        connection = ldap.initialize(settings.AUTH_LDAP_SERVER_URI)
        connection.set_option(ldap.OPT_NETWORK_TIMEOUT, 10)
        connection.simple_bind_s(settings.AUTH_LDAP_BIND_DN, settings.AUTH_LDAP_BIND_PASSWORD)
        connection.unbind_s()
    except ldap.LDAPError as error:
        raise DirectoryUnreachable(str(error)) from None
    backend = Backend()
    people = changed = forgotten = 0
    accounts = DirectoryAccount.objects.filter(source=SOURCE, user__is_active=True)
    for account in accounts.select_related("user"):
        people += 1
        user = backend.populate_user(account.user.get_username())
        if user is None:
            directory.forget(account)
            forgotten += 1
            continue
        done = _apply(user, account.subject, user.ldap_user.group_names, now)
        changed += bool(done.added or done.changed or done.removed)
    return Synced(people, changed, forgotten)
