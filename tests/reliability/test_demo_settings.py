"""The demo runs production settings (scripts/demo-env), over plain HTTP on loopback: the
product's own error pages in the reader's language (never Django's debug 404 listing every
URL pattern), a login that works without TLS, pages compressed, and static files compressed
and cached for good under hashed names."""

import gzip
import http.client
import re
import subprocess
from urllib.parse import urlencode

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.conftest import PASSWORD
from tests.reliability.conftest import ROOT

pytestmark = pytest.mark.postgresql

DEMO_VARIABLES = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "BEHIND_TLS_PROXY", "SECURE_COOKIES",
                  "EMAIL_BACKEND")


def demo_env(folder) -> dict[str, str]:
    """What scripts/demo-env exports (its state kept in `folder`, not the checkout's var/)."""
    out = subprocess.run(["/bin/bash", "-c", ". scripts/demo-env && env -0"], cwd=ROOT,
                         check=True, capture_output=True,
                         env={"PATH": "/usr/bin:/bin", "demo_var": str(folder)})
    exported = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    return {name: exported[name] for name in DEMO_VARIABLES}


def fetch(server, path: str, **headers: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    response.body = response.read()
    conn.close()
    return response


def test_the_demo_serves_the_products_own_404_compressed_assets_and_logs_in_over_http(
        server, tmp_path, lead, contract):
    # The server hashes as production does (the tests' own hasher is MD5, for speed).
    lead.password = PBKDF2PasswordHasher().encode(PASSWORD, "demo-test-salt", iterations=1000)
    lead.save(update_fields=["password"])
    env = demo_env(tmp_path)
    assert env["DEBUG"] == "0"
    assert (tmp_path / "secret-key").stat().st_mode & 0o077 == 0  # the demo's key, private
    assert demo_env(tmp_path)["SECRET_KEY"] == env["SECRET_KEY"]  # kept between starts
    demo = server(**env)

    missing = fetch(demo, "/zh-hans/no-such-page/")
    assert missing.status == 404
    page = missing.body.decode()
    assert "未找到" in page and 'class="site-header"' in page
    assert "URLconf" not in page and "DEBUG = True" not in page

    # The login form over plain HTTP: its cookies are not Secure-only, so a browser keeps them.
    form = fetch(demo, "/en/accounts/login/")
    csrf = form.getheader("Set-Cookie").split(";")[0]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.body.decode()).group(1)
    conn = http.client.HTTPConnection("127.0.0.1", demo.port, timeout=30)
    conn.request("POST", "/en/accounts/login/", body=urlencode(
        {"csrfmiddlewaretoken": token, "username": "lead", "password": PASSWORD}),
        headers={"Cookie": csrf, "Content-Type": "application/x-www-form-urlencoded"})
    logged_in = conn.getresponse()
    logged_in.read()
    conn.close()
    assert logged_in.status == 302
    session = [c for c in logged_in.headers.get_all("Set-Cookie") if c.startswith("sessionid=")]
    assert session and "secure" not in session[0].lower()

    tenant = fetch(demo, "/en/tenants/vision/", Cookie=session[0].split(";")[0],
                   **{"Accept-Encoding": "gzip"})
    assert tenant.status == 200
    assert tenant.getheader("Content-Encoding") == "gzip"  # the page itself, with its figures
    html = gzip.decompress(tenant.body).decode()
    plotly = re.search(r'src="(/static/vendor/plotly-cartesian\.min\.[0-9a-f]{12}\.js)"',
                       html).group(1)

    bundle = fetch(demo, plotly, **{"Accept-Encoding": "gzip, deflate, br, zstd"})
    assert bundle.status == 200
    assert bundle.getheader("Content-Encoding") == "br"
    assert "immutable" in bundle.getheader("Cache-Control")
    assert len(bundle.body) < 450_000  # 1.5 MB as written: only the cartesian trace types
