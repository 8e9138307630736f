"""Every URL against every kind of caller: anonymous, an agent's node token, a member, the
lead of another tenant, the lead, a staff user without permissions, an operator. A staff user
gets what the lead of another tenant gets unless a row names "staff": being staff is not being
an operator (the operators group, or a superuser, is). One table; a URL added without a row fails
test_every_url_has_a_row. Scrapes come from outside the metrics allow-list, so /metrics
answers to its token only (tests/test_metrics.py)."""

import json
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from loans.models import (
    Amendment,
    BurstRequest,
    Contract,
    Membership,
    Plan,
    Recommendation,
    SharingGroup,
    SharingMember,
    Tenant,
)
from metering.models import Gpu, Node, Reattribution
from tests.conftest import FAST_HASHERS, make_user

ACTORS = ("anonymous", "agent", "member", "outsider", "lead", "staff", "operator")
OUTSIDE = "203.0.113.9"
# A status, or a redirect: (302, where it leads).
LOGIN, ADMIN_LOGIN = (302, "/en/accounts/login/"), (302, "/en/admin/login/")
BACK = (302, "/en/tenants/vision/")  # a page form's answer: back to the page, with a message

# name: (method, path, {actor: status}); "*" is every actor not named.
# {c}: the vision contract, {b}: a queued burst of it, {r}: an open recommendation of it,
# {n}: the node whose token the agent holds, {a}: a re-attribution.
TABLE = {
    "healthz": ("GET", "/healthz", {"*": 200}),
    "favicon": ("GET", "/favicon.ico", {"*": 302}),
    "metrics": ("GET", "/metrics", {"*": 403}),
    "set_language": ("POST", "/i18n/setlang/", {"*": 302}),
    "api-samples": ("POST", "/api/v1/samples", {"*": 401, "agent": 202}),
    "api-root": ("GET", "/api/v1/", {"*": 401, "member": 200, "outsider": 200, "lead": 200,
                                     "operator": 200}),
    "api-schema": ("GET", "/api/schema/", {"*": 200}),
    "api-docs": ("GET", "/api/docs/", {"*": 200}),
    # A tenant's data: its members and the operators; anyone else learns nothing (404).
    "api-tenant-usage": ("GET", "/api/v1/tenants/vision/usage",
                         {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                          "operator": 200}),
    "api-buy-vs-loan": ("GET", "/api/v1/tenants/vision/buy-vs-loan",
                        {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                         "operator": 200}),
    "api-quota-manifests": ("GET", "/api/v1/tenants/vision/quota-manifests",
                            {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                             "operator": 200}),
    "api-contract-burndown": ("GET", "/api/v1/contracts/{c}/burndown",
                              {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                               "operator": 200}),
    "api-contract-heatmap": ("GET", "/api/v1/contracts/{c}/heatmap",
                             {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                              "operator": 200}),
    # The ledger: members read their tenant's statements and amendments; operators write.
    "api-contract-statements": ("GET", "/api/v1/contracts/{c}/statements",
                                {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                                 "operator": 200}),
    "api-contract-overage-policy": ("GET", "/api/v1/contracts/{c}/overage-policy",
                                    {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                                     "operator": 200}),
    "api-contract-amendments": ("GET", "/api/v1/contracts/{c}/amendments",
                                {"*": 401, "member": 200, "outsider": 404, "lead": 200,
                                 "operator": 200}),
    # With an empty body: the operator is told what is missing; nobody changes anything.
    "api-contract-amend": ("POST", "/api/v1/contracts/{c}/amendments",
                           {"*": 401, "member": 403, "outsider": 404, "lead": 403,
                            "operator": 400}),
    "api-contract-terminate": ("POST", "/api/v1/contracts/{c}/terminate",
                               {"*": 401, "member": 403, "outsider": 404, "lead": 403,
                                "operator": 400}),
    "reattribution-list": ("GET", "/api/v1/reattributions/",
                           {"*": 403, "anonymous": 401, "agent": 401, "operator": 200}),
    "reattribution-detail": ("GET", "/api/v1/reattributions/{a}/",
                             {"*": 403, "anonymous": 401, "agent": 401, "operator": 200}),
    # The operators' API.
    "tenant-list": ("GET", "/api/v1/tenants/", {"*": 403, "anonymous": 401, "agent": 401,
                                                "operator": 200}),
    "tenant-detail": ("GET", "/api/v1/tenants/vision/", {"*": 403, "anonymous": 401,
                                                         "agent": 401, "operator": 200}),
    "plan-list": ("GET", "/api/v1/plans/", {"*": 403, "anonymous": 401, "agent": 401,
                                            "operator": 200}),
    "plan-detail": ("GET", "/api/v1/plans/{p}/", {"*": 403, "anonymous": 401, "agent": 401,
                                                  "operator": 200}),
    "contract-list": ("GET", "/api/v1/contracts/", {"*": 403, "anonymous": 401, "agent": 401,
                                                    "operator": 200}),
    "contract-detail": ("GET", "/api/v1/contracts/{c}/", {"*": 403, "anonymous": 401,
                                                          "agent": 401, "operator": 200}),
    "cluster-list": ("GET", "/api/v1/clusters/", {"*": 403, "anonymous": 401, "agent": 401,
                                                  "operator": 200}),
    "cluster-detail": ("GET", "/api/v1/clusters/default/",
                       {"*": 403, "anonymous": 401, "agent": 401, "operator": 200}),
    "node-list": ("GET", "/api/v1/nodes/", {"*": 403, "anonymous": 401, "agent": 401,
                                            "operator": 200}),
    "node-detail": ("GET", "/api/v1/nodes/{n}/", {"*": 403, "anonymous": 401, "agent": 401,
                                                  "operator": 200}),
    "node-revoke-token": ("POST", "/api/v1/nodes/{n}/revoke-token/",
                          {"*": 403, "anonymous": 401, "agent": 401, "operator": 200}),
    "node-rotate-token": ("POST", "/api/v1/nodes/{n}/rotate-token/",
                          {"*": 403, "anonymous": 401, "agent": 401, "operator": 200}),
    # Bursts: members see them, leads ask and cancel, operators decide.
    "burst-list": ("GET", "/api/v1/bursts/", {"*": 401, "member": 200, "outsider": 200,
                                              "lead": 200, "operator": 200}),
    "burst-detail": ("GET", "/api/v1/bursts/{b}/", {"*": 401, "member": 200, "outsider": 404,
                                                    "lead": 200, "operator": 200}),
    "burst-cancel": ("POST", "/api/v1/bursts/{b}/cancel/",
                     {"*": 401, "member": 403, "outsider": 404, "lead": 200, "operator": 200}),
    "burst-approve": ("POST", "/api/v1/bursts/{b}/approve/",
                      {"*": 401, "member": 403, "outsider": 404, "lead": 403, "operator": 200}),
    "burst-reject": ("POST", "/api/v1/bursts/{b}/reject/",
                     {"*": 401, "member": 403, "outsider": 404, "lead": 403, "operator": 200}),
    "burst-revoke": ("POST", "/api/v1/bursts/{b}/revoke/",
                     {"*": 401, "member": 403, "outsider": 404, "lead": 403, "operator": 409}),
    "burst-prioritise": ("POST", "/api/v1/bursts/{b}/prioritise/",
                         {"*": 401, "member": 403, "outsider": 404, "lead": 403,
                          "operator": 200}),
    # Pages.
    "home": ("GET", "/en/", {"*": LOGIN, "member": BACK, "outsider": (302, "/en/tenants/speech/"),
                             "lead": BACK, "staff": 200, "operator": (302, "/en/fleet/")}),
    "login": ("GET", "/en/accounts/login/", {"*": 200}),
    # Single sign-on is not configured here: its pages are not there for anyone
    # (tests/browser/test_single_sign_on.py signs in through a provider).
    "oidc_authentication_init": ("GET", "/sso/", {"*": 404}),
    "oidc_authentication_callback": ("GET", "/sso/callback/?code=x&state=y", {"*": 404}),
    "oidc_logout": ("POST", "/sso/logout/", {"*": LOGIN}),
    "logout": ("POST", "/en/accounts/logout/", {"*": LOGIN}),
    "password_change": ("GET", "/en/accounts/password/", {"*": 200, "anonymous": LOGIN,
                                                          "agent": LOGIN}),
    "password_change_done": ("GET", "/en/accounts/password/done/",
                             {"*": 200, "anonymous": LOGIN, "agent": LOGIN}),
    "tenant": ("GET", "/en/tenants/vision/", {"*": LOGIN, "member": 200, "outsider": 404,
                                              "lead": 200, "operator": 200}),
    "tenant-periods-csv": ("GET", "/en/tenants/vision/periods.csv",
                           {"*": LOGIN, "member": 200, "outsider": 404, "lead": 200,
                            "operator": 200}),
    "recommendation-decide": ("POST", "/en/tenants/vision/recommendations/{r}/dismiss/",
                              {"*": LOGIN, "member": 403, "outsider": 404, "lead": BACK,
                               "operator": 403}),
    "overage-policy": ("POST", "/en/tenants/vision/contracts/{c}/overage-policy/",
                       {"*": LOGIN, "member": BACK, "outsider": 404, "lead": BACK,
                        "operator": BACK}),
    "burst-ask": ("POST", "/en/tenants/vision/contracts/{c}/bursts/",
                  {"*": LOGIN, "member": BACK, "outsider": 404, "lead": BACK, "operator": BACK}),
    "burst-cancel-page": ("POST", "/en/tenants/vision/bursts/{b}/cancel/",
                          {"*": LOGIN, "member": BACK, "outsider": 404, "lead": BACK,
                           "operator": BACK}),
    "buy-vs-loan": ("GET", "/en/tenants/vision/buy-vs-loan/",
                    {"*": LOGIN, "member": 200, "outsider": 404, "lead": 200,
                     "operator": 200}),
    "fleet": ("GET", "/en/fleet/", {"*": 403, "anonymous": LOGIN, "agent": LOGIN,
                                    "operator": 200}),
    "fleet-csv": ("GET", "/en/fleet.csv", {"*": 403, "anonymous": LOGIN, "agent": LOGIN,
                                           "operator": 200}),
    "alerts": ("GET", "/en/alerts/", {"*": 403, "anonymous": LOGIN, "agent": LOGIN,
                                      "operator": 200}),
    # The audit log: operators every entry, a tenant's leads its own (not its members).
    "audit": ("GET", "/en/audit/", {"*": 403, "anonymous": LOGIN, "agent": LOGIN,
                                    "operator": 200}),
    "audit-csv": ("GET", "/en/audit.csv", {"*": 403, "anonymous": LOGIN, "agent": LOGIN,
                                           "operator": 200}),
    "tenant-audit": ("GET", "/en/tenants/vision/audit/",
                     {"*": LOGIN, "member": 403, "outsider": 404, "lead": 200,
                      "operator": 200}),
    "tenant-audit-csv": ("GET", "/en/tenants/vision/audit.csv",
                         {"*": LOGIN, "member": 403, "outsider": 404, "lead": 200,
                          "operator": 200}),
    "advise": ("GET", "/en/advise/", {"*": 403, "anonymous": LOGIN, "agent": LOGIN,
                                      "operator": 200}),
    # Everyone's own API tokens; operators everyone's (tests/loans/web/test_tokens_page.py).
    "api-tokens": ("GET", "/en/tokens/", {"*": 200, "anonymous": LOGIN, "agent": LOGIN}),
    "api-token-revoke": ("POST", "/en/tokens/999999/revoke/",
                         {"*": 404, "anonymous": LOGIN, "agent": LOGIN}),
    # Everyone's own choices; a lead's tenants' channels, operators every one
    # (tests/loans/web/test_notifications_page.py).
    "notifications": ("GET", "/en/notifications/", {"*": 200, "anonymous": LOGIN,
                                                      "agent": LOGIN}),
    "channel-remove": ("POST", "/en/notifications/channels/999999/remove/",
                       {"*": 404, "anonymous": LOGIN, "agent": LOGIN}),
    "tenant-advise": ("GET", "/en/tenants/vision/advise/",
                      {"*": LOGIN, "member": 403, "outsider": 404, "lead": 200,
                       "operator": 200}),
    # Sharing groups: a lead reads the groups its team's contracts are in (the group's totals
    # and team names); a member who is not a lead reads none (subtraction would give it the
    # partners' costs); operators read every group and change them.
    "api-sharing-groups": ("GET", "/api/v1/sharing-groups/",
                           {"*": 200, "anonymous": 401, "agent": 401}),
    "api-sharing-groups-create": ("POST", "/api/v1/sharing-groups/",
                                  {"*": 403, "anonymous": 401, "agent": 401, "operator": 400}),
    "api-sharing-group": ("GET", "/api/v1/sharing-groups/{g}/",
                          {"*": 401, "member": 404, "outsider": 404, "lead": 200,
                           "operator": 200}),
    "api-sharing-group-contracts": ("POST", "/api/v1/sharing-groups/{g}/contracts/",
                                    {"*": 401, "member": 404, "outsider": 404, "lead": 403,
                                     "operator": 400}),
    "api-sharing-group-contract": ("DELETE", "/api/v1/sharing-groups/{g}/contracts/{c}/",
                                   {"*": 401, "member": 404, "outsider": 404, "lead": 403,
                                    "operator": 200}),
    # The admin: operators only; everyone else is sent to its login.
    "admin-index": ("GET", "/en/admin/", {"*": ADMIN_LOGIN, "operator": 200}),
}
# Who changes something with each POST; for everyone else the same request changes nothing.
MUTATORS = {
    "node-revoke-token": {"operator"}, "node-rotate-token": {"operator"},
    "burst-cancel": {"lead", "operator"}, "burst-approve": {"operator"},
    "burst-reject": {"operator"}, "burst-prioritise": {"operator"},
    "recommendation-decide": {"lead"}, "burst-ask": {"lead"},
    "burst-cancel-page": {"lead", "operator"},  # one rule for the page and the API
    "api-sharing-group-contract": {"operator"},
}
# Names the table uses for URLs that share a name with another (or have none).
ALIASES = {"burst-cancel-page": "burst-cancel", "admin-index": None,
           "api-contract-amend": "api-contract-amendments",
           "api-sharing-groups-create": "api-sharing-groups"}


def every_url_name(patterns=None) -> set[str]:
    names = set()
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace != "admin":  # the admin: test_the_admin_is_for_operators
                names |= every_url_name(pattern.url_patterns)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(pattern.name)
    return names


def test_every_url_has_a_row():
    covered = {ALIASES.get(name, name) for name in TABLE} - {None}
    assert every_url_name() - covered == set()


class World:
    """The objects every case reads, built once for a class of cases (each case runs in a
    savepoint of the class's transaction, so what a POST changes is gone before the next)."""

    def __init__(self):
        tenant = Tenant.objects.create(slug="vision", name="Vision Lab")
        other = Tenant.objects.create(slug="speech", name="Speech")
        self.users = {"member": make_user("member"), "outsider": make_user("outsider"),
                      "lead": make_user("lead"), "operator": make_user("operator", staff=True),
                      # Staff, without a permission or a membership.
                      "staff": get_user_model().objects.create_user(
                          username="staffer", password="x" * 20, is_staff=True)}
        for actor, team, role in (("member", tenant, Membership.Role.MEMBER),
                                  ("outsider", other, Membership.Role.LEAD),
                                  ("lead", tenant, Membership.Role.LEAD)):
            Membership.objects.create(user=self.users[actor], tenant=team, role=role)
        plan = Plan.objects.create(
            name="H100 Guaranteed 8", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=8,
            max_quota_gpus=16, committed_gpu_hours=Decimal("1000"),
            committed_rate=Decimal("10.00"), term_months=12, currency="CNY")
        contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1),
                            time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
        contract.full_clean()
        contract.save()
        node = Node.objects.create(name="gpu-node-01", default_tenant=tenant)
        now = timezone.now()
        # Room for the burst: an operator's approval grants only what the pool can hold.
        Gpu.objects.bulk_create(Gpu(uuid=f"GPU-{i}", node=node, index=i, model=plan.gpu_model,
                                    last_seen_at=now) for i in range(12))
        burst = BurstRequest.objects.create(
            contract=contract, gpus=2, starts_at=now + timedelta(days=1),
            ends_at=now + timedelta(days=2), reason="sweep", requested_by=self.users["lead"],
            created_at=now)
        rec = Recommendation.objects.create(contract=contract, kind="commitment", message="m",
                                            created_at=now)
        move = Reattribution.objects.create(
            scope="unattributed", start=now - timedelta(days=1), end=now, tenant=tenant,
            gpu_hours=0, samples=0, reason="r", author=self.users["operator"])
        group = SharingGroup.objects.create(name="org", currency="CNY")
        SharingMember.objects.create(group=group, contract=contract,
                                     joins_at=contract.periods()[0].start)
        self.token = node.issue_token()
        self.sessions = {}
        for actor, user in self.users.items():
            client = Client()
            client.force_login(user)
            self.sessions[actor] = client.cookies[django_settings.SESSION_COOKIE_NAME].value
        self.ids = {"c": contract.pk, "p": plan.pk, "b": burst.pk, "r": rec.pk, "n": node.pk,
                    "a": move.pk, "g": group.pk}

    def client(self, actor: str, **kwargs) -> Client:
        """A fresh client for the actor, logged in where it has a user: a case that logs out
        or switches the language leaves the next case's client as it was."""
        client = Client(REMOTE_ADDR=OUTSIDE, **kwargs)
        if actor == "agent":
            client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {self.token}"
        elif actor in self.sessions:
            client.cookies[django_settings.SESSION_COOKIE_NAME] = self.sessions[actor]
        return client


@pytest.fixture(scope="class")
def world(django_db_setup, django_db_blocker):
    """One World for the class, in a transaction rolled back after its last case."""
    with (django_db_blocker.unblock(), override_settings(PASSWORD_HASHERS=FAST_HASHERS),
          transaction.atomic()):
        built = World()
        yield built
        transaction.set_rollback(True)


def body_for(name: str, ids: dict) -> tuple[bytes | dict, str | None]:
    now = timezone.now()
    if name == "api-samples":
        return json.dumps({"node": "gpu-node-01", "samples": []}).encode(), "application/json"
    if name == "burst-ask":
        return {"gpus": 2, "reason": "sweep",
                "starts_at": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
                "ends_at": (now + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")}, None
    if name == "burst-prioritise":
        return json.dumps({"priority": 5}).encode(), "application/json"
    if name == "set_language":
        return {"language": "zh-hans", "next": "/"}, None
    return b"", "application/json"


def fingerprint() -> tuple:
    """What the POSTs of the table may change."""
    return (list(BurstRequest.objects.order_by("pk").values_list("pk", "state", "priority")),
            list(Recommendation.objects.values_list("pk", "state")),
            list(Node.objects.values_list("pk", "token_hash")),
            list(Contract.objects.values_list("pk", "term_months", "status")),
            Amendment.objects.count(), Reattribution.objects.count(),
            list(SharingMember.objects.values_list("pk", "leaves_at")),
            SharingGroup.objects.count())


CASES = [(name, actor) for name in TABLE for actor in ACTORS]


CSRF_POSTS = [
    ("anonymous", "/en/accounts/login/", {"username": "lead", "password": "x"}),
    ("lead", "/en/accounts/logout/", {}),
    ("lead", "/i18n/setlang/", {"language": "zh-hans"}),
    ("lead", "/en/accounts/password/", {"old_password": "x", "new_password1": "y",
                                        "new_password2": "y"}),
    ("lead", "/en/tenants/vision/contracts/{c}/bursts/", {"gpus": 2}),
    ("lead", "/en/tenants/vision/bursts/{b}/cancel/", {}),
    ("lead", "/en/tenants/vision/recommendations/{r}/accept/", {}),
    ("operator", "/en/admin/login/", {"username": "operator", "password": "x"}),
    ("operator", "/en/admin/loans/tenant/add/", {"slug": "new", "name": "New"}),
    ("lead", "/api/v1/bursts/{b}/cancel/", {}),  # the API, with a session instead of a token
    ("operator", "/api/v1/nodes/{n}/rotate-token/", {}),
]


def admin_pages() -> list[str]:
    from django.contrib import admin
    from django.urls import reverse

    pages = []
    for model in admin.site._registry:
        meta = model._meta
        pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
    return sorted(pages)


@pytest.mark.usefixtures("db")
class TestAccess:
    """The cases, each in a savepoint of the class's world."""

    @pytest.mark.parametrize(("name", "actor"), CASES, ids=[f"{n}-{a}" for n, a in CASES])
    def test_each_caller_gets_exactly_what_it_should(self, world, name, actor):
        check_case(world, name, actor)

    @pytest.mark.parametrize(("actor", "path", "data"), CSRF_POSTS,
                             ids=[path for _actor, path, _data in CSRF_POSTS])
    def test_every_form_and_session_post_needs_the_csrf_token(self, world, actor, path, data):
        client = world.client(actor, enforce_csrf_checks=True)
        before = fingerprint()
        response = client.post(path.format(**world.ids), data)
        assert response.status_code == 403, response.content[:200]
        assert fingerprint() == before

    def test_with_its_csrf_token_the_same_form_goes_through(self, world):
        client = world.client("lead", enforce_csrf_checks=True)
        client.get("/en/tenants/vision/")  # the page sets the CSRF cookie its forms use
        token = client.cookies["csrftoken"].value
        response = client.post(f"/en/tenants/vision/bursts/{world.ids['b']}/cancel/",
                               {"csrfmiddlewaretoken": token})
        assert response.status_code == 302
        assert BurstRequest.objects.get().state == "cancelled"

    @pytest.mark.parametrize("path", admin_pages())
    def test_the_admin_is_for_operators(self, world, path):
        """Every model's page in the admin: operators see it; everyone else, staff outside
        the operators group included, is sent to the admin's login, whatever else they may
        do elsewhere."""
        for actor in ACTORS:
            response = world.client(actor).get(path)
            if actor == "operator":
                assert response.status_code == 200, (path, response.status_code)
            else:
                assert response.status_code == 302, (path, actor, response.status_code)
                assert response["Location"].startswith("/en/admin/login/"), (
                    response["Location"])


def check_case(world: World, name: str, actor: str) -> None:
    method, path, expected = TABLE[name]
    want = expected.get(actor, expected.get("outsider", expected["*"]) if actor == "staff"
                        else expected["*"])
    url = path.format(**world.ids)
    client = world.client(actor)
    before = fingerprint()
    if method == "GET":
        response = client.get(url)
    elif method == "DELETE":
        response = client.delete(url)
    else:
        body, content_type = body_for(name, world.ids)
        kwargs = {"content_type": content_type} if content_type else {}
        response = client.post(url, body, **kwargs)
    status, place = want if isinstance(want, tuple) else (want, None)
    assert response.status_code == status, (url, actor, response.content[:300])
    if place is not None:
        assert response["Location"].startswith(place), response["Location"]
    changed = fingerprint() != before
    assert changed == (actor in MUTATORS.get(name, ())), (url, actor, "changed" if changed
                                                           else "unchanged")


