"""Single sign-on through a real OpenID Connect provider (tests/oidc/provider.mjs, the certified
oidc-provider library on Node, started here on a free port), in chromium: a lead signs in and
lands on its tenant with the role its group maps to; a group removed at the provider takes the
tenant away at the next sign-in; the operators' group opens the fleet; a provider that stops
answering gives a page that says so. Node and the provider's packages (make oidc-provider)
must be there: they are never a reason to skip."""

import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from loans.models import DirectoryAccount, Membership, Tenant
from tests.helpers import free_port

pytestmark = pytest.mark.browser
HERE = Path(__file__).resolve().parent.parent / "oidc"
ROLES = {"gpu-vision-leads": "vision:lead", "gpu-vision": "vision:member", "gpu-ops": "operators"}


class Provider:
    def __init__(self, tmp_path: Path, redirect: str):
        self.port = free_port()
        self.people = tmp_path / "people.json"
        self.set({})
        node = shutil.which("node")
        assert node, "node is needed for the OpenID provider (Debian's nodejs)"
        assert (HERE / "node_modules" / "oidc-provider").is_dir(), "run make oidc-provider"
        self.process = subprocess.Popen(
            [node, str(HERE / "provider.mjs"), str(self.port), redirect, str(self.people)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(  # noqa: S310 - our own provider, over http
                    f"{self.url}/.well-known/openid-configuration", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"the provider did not start: {self.process.stdout.read()}")

    def set(self, people: dict) -> None:
        self.people.write_text(json.dumps(people))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def provider(live_server, settings, tmp_path):
    running = Provider(tmp_path, f"{live_server.url}/sso/callback/")
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "gpuloans", "test-secret"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{running.url}/auth"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{running.url}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{running.url}/me"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{running.url}/jwks"
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    settings.DIRECTORY_GROUP_ROLES = ROLES
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS,
                                        "loans.services.identity.oidc.Backend"]
    yield running
    running.stop()


def sign_in(page, base: str, login: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{base}/en/accounts/login/")
    page.click("#sso")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "anything")
    page.click("button[type=submit]")
    page.click("button:has-text('Continue')")  # the provider's consent
    page.wait_for_load_state("networkidle")


def test_a_lead_signs_in_loses_the_tenant_with_its_group_and_an_operator_opens_the_fleet(
        live_server, page, provider, db):
    Tenant.objects.create(slug="vision", name="Vision Lab")
    provider.set({"ada": {"email": "ada@example.org", "groups": ["gpu-vision-leads", "other"]},
                  "ops": {"email": "ops@example.org", "groups": ["gpu-ops"]}})
    sign_in(page, live_server.url, "ada")
    assert "/tenants/vision/" in page.url
    [held] = Membership.objects.filter(user__username="ada")
    assert (held.tenant.slug, held.role, held.from_directory) == ("vision", "lead", True)
    assert DirectoryAccount.objects.get(user__username="ada").groups == [
        "gpu-vision-leads", "other"]

    provider.set({"ada": {"email": "ada@example.org", "groups": ["other"]},
                  "ops": {"email": "ops@example.org", "groups": ["gpu-ops"]}})
    sign_in(page, live_server.url, "ada")
    assert "/tenants/vision/" not in page.url
    assert not Membership.objects.filter(user__username="ada").exists()

    sign_in(page, live_server.url, "ops")
    assert page.url.endswith("/en/fleet/")


def test_a_provider_that_stops_answering_is_said_not_a_server_error(
        live_server, page, provider, settings, db):
    provider.set({"ada": {"email": "ada@example.org", "groups": []}})
    settings.OIDC_OP_TOKEN_ENDPOINT = f"http://127.0.0.1:{free_port()}/token"  # nobody there
    sign_in(page, live_server.url, "ada")
    assert page.locator("#sso-unreachable").is_visible()
    assert "Example SSO did not answer" in page.inner_text("#sso-unreachable")


def test_the_login_page_offers_single_sign_on_only_where_it_is_configured(
        live_server, page, provider, settings, db):
    page.goto(f"{live_server.url}/en/accounts/login/")
    assert page.inner_text("#sso") == "Sign in with Example SSO"
    settings.OIDC_RP_CLIENT_ID = ""
    page.goto(f"{live_server.url}/en/accounts/login/")
    assert page.locator("#sso").count() == 0
    assert page.goto(f"{live_server.url}/sso/").status == 404


def test_a_group_removed_at_the_provider_is_applied_at_the_session_refresh(
        live_server, page, provider, settings, db):
    Tenant.objects.create(slug="vision", name="Vision Lab")
    settings.OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = 2
    provider.set({"ada": {"email": "ada@example.org", "groups": ["gpu-vision-leads"]}})
    sign_in(page, live_server.url, "ada")
    assert Membership.objects.filter(user__username="ada").exists()
    provider.set({"ada": {"email": "ada@example.org", "groups": []}})
    time.sleep(2.5)
    page.goto(f"{live_server.url}/en/")  # past it: to the provider and back, no prompt
    page.wait_for_load_state("networkidle")
    assert not Membership.objects.filter(user__username="ada").exists()
    assert "/tenants/vision/" not in page.url
