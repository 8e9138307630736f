"""Single sign-on's edges without a provider (the sign-ins themselves run through a real one in
tests/browser/test_single_sign_on.py): a forged or stale answer is refused with a word on the
login page, never a server error, and a half-configured sign-on stops the start."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def configured(settings):
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "gpuloans", "s"
    for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS"):
        setattr(settings, f"OIDC_OP_{name}_ENDPOINT", f"http://127.0.0.1:9/{name.lower()}")
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS,
                                        "loans.services.identity.oidc.Backend"]


@pytest.mark.django_db
def test_an_answer_the_session_did_not_ask_for_is_refused_and_said(client, configured):
    answer = client.get("/sso/callback/?code=forged&state=not-ours")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/?sso=failed"
    page = client.get("/en/accounts/login/?sso=failed")
    assert "The single sign-on did not sign you in" in page.content.decode()
    started = client.get("/sso/")
    assert started.status_code == 302 and started["Location"].startswith(
        "http://127.0.0.1:9/authorization?")


def test_a_client_id_without_the_endpoints_stops_the_start():
    env = {**os.environ, "DEBUG": "1", "OIDC_CLIENT_ID": "gpuloans",
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "single sign-on needs OIDC_CLIENT_SECRET, OIDC_AUTHORIZATION_ENDPOINT" in (
        done.stdout + done.stderr)
