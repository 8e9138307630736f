"""LDAP logins against a real directory (Debian's slapd, tests/ldap.py): a lead logs in through
the login form and lands with the role its group maps to; a group removed in the directory
takes the tenant away at the next login; the operators' group opens the fleet; a local account
of the same name is never taken over; directory logins are throttled like local ones; the
hourly sync deactivates, with their tokens, the people the directory no longer holds, and
changes nothing when it cannot be reached."""

from datetime import UTC, datetime

import pytest
from django.test import Client

from loans.models import ApiToken, DirectoryAccount, Membership, Tenant
from loans.services.identity import ldap as directory_ldap
from tests.conftest import PASSWORD, make_user
from tests.ldap import ADMIN, SECRET, SUFFIX, Directory

NOW = datetime(2026, 12, 7, 9, tzinfo=UTC)
ROLES = {"gpu-vision-leads": "vision:lead", "gpu-ops": "operators"}


@pytest.fixture(scope="module")
def slapd(tmp_path_factory):
    running = Directory(tmp_path_factory.mktemp("slapd"))
    yield running
    running.stop()


@pytest.fixture
def directory(slapd, settings, db):
    import ldap
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

    settings.LDAP_SERVER_URI = settings.AUTH_LDAP_SERVER_URI = slapd.uri
    settings.AUTH_LDAP_BIND_DN, settings.AUTH_LDAP_BIND_PASSWORD = ADMIN, SECRET
    settings.AUTH_LDAP_USER_SEARCH = LDAPSearch(f"ou=people,{SUFFIX}", ldap.SCOPE_SUBTREE,
                                                "(uid=%(user)s)")
    settings.AUTH_LDAP_GROUP_SEARCH = LDAPSearch(f"ou=groups,{SUFFIX}", ldap.SCOPE_SUBTREE,
                                                 "(objectClass=groupOfNames)")
    settings.AUTH_LDAP_GROUP_TYPE = GroupOfNamesType()
    settings.AUTH_LDAP_USER_ATTR_MAP = {"email": "mail"}
    settings.DIRECTORY_GROUP_ROLES = ROLES
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS,
                                        "loans.services.identity.ldap.Backend"]
    Tenant.objects.create(slug="vision", name="Vision Lab")
    return slapd


def log_in(username: str, password: str, address: str = "203.0.113.7"):
    client = Client(REMOTE_ADDR=address)
    return client, client.post("/en/accounts/login/", {"username": username,
                                                       "password": password})


def test_a_lead_logs_in_loses_the_tenant_with_its_group_and_an_operator_opens_the_fleet(
        directory):
    ada = directory.person("ada", "ada-pw", "ada@example.org")
    ops = directory.person("olu", "olu-pw", "olu@example.org")
    leads = directory.group("gpu-vision-leads", ada)
    directory.group("gpu-ops", ops)

    client, answer = log_in("ada", "ada-pw")
    assert answer.status_code == 302
    assert client.get("/en/")["Location"] == "/en/tenants/vision/"
    [held] = Membership.objects.filter(user__username="ada")
    assert (held.role, held.from_directory) == ("lead", True)
    account = DirectoryAccount.objects.get(user__username="ada")
    assert (account.source, account.subject) == ("ldap", ada)

    directory.modify(f"dn: {leads}\nchangetype: modify\nadd: member\nmember: {ops}\n-\n"
                     f"delete: member\nmember: {ada}\n")
    log_in("ada", "ada-pw")
    assert not Membership.objects.filter(user__username="ada").exists()

    client, _answer = log_in("olu", "olu-pw")
    assert client.get("/en/")["Location"] == "/en/fleet/"


def test_a_local_account_is_never_taken_over_and_wrong_passwords_are_throttled(
        directory, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("kim")  # a local account, with the tests' password
    directory.person("kim", "directory-pw", "kim@example.org")
    _client, answer = log_in("kim", "directory-pw")
    assert answer.status_code == 200  # refused: kim is the local account's
    assert log_in("kim", PASSWORD)[1].status_code == 302
    assert not DirectoryAccount.objects.filter(user__username="kim").exists()

    directory.person("lee", "lee-pw", "lee@example.org")
    for _ in range(3):
        log_in("lee", "wrong", address="198.51.100.9")
    assert log_in("lee", "lee-pw", address="198.51.100.9")[1].status_code == 429


def test_the_sync_forgets_who_left_and_changes_nothing_when_the_directory_is_down(
        directory, settings):
    gone = directory.person("max", "max-pw", "max@example.org")
    directory.group("gpu-vision-leads-2", gone)
    settings.DIRECTORY_GROUP_ROLES = {**ROLES, "gpu-vision-leads-2": "vision:lead"}
    log_in("max", "max-pw")
    user = DirectoryAccount.objects.get(user__username="max").user
    ApiToken.issue(user=user, name="script")
    assert directory_ldap.sync(NOW).forgotten == 0

    settings.AUTH_LDAP_SERVER_URI = "ldap://127.0.0.1:9"
    with pytest.raises(directory_ldap.DirectoryUnreachable):
        directory_ldap.sync(NOW)
    settings.AUTH_LDAP_SERVER_URI = directory.uri

    directory.delete(f"cn=gpu-vision-leads-2,ou=groups,{SUFFIX}")
    directory.delete(gone)
    assert directory_ldap.sync(NOW).forgotten == 1
    user.refresh_from_db()
    assert not user.is_active and not ApiToken.objects.filter(user=user).exists()
    assert not Membership.objects.filter(user=user).exists()
