"""The application as it runs in production: gunicorn workers on PostgreSQL, with Redis shared
between them, started as a separate process against the test database."""

import http.client
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import redis
from django.conf import settings
from django.db import connection

from tests.helpers import free_port, redis_url

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = redis_url(9)


@pytest.fixture(scope="session")
def static_root(tmp_path_factory) -> Path:
    """Static files collected once, as production serves them (hashed names, compressed)."""
    folder = tmp_path_factory.mktemp("static")
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"],
                   cwd=ROOT, env={**os.environ, **production_env(), "STATIC_ROOT": str(folder)},
                   check=True)
    return folder


def production_env() -> dict[str, str]:
    return {"DEBUG": "0", "SECRET_KEY": "reliability-tests-" + "k" * 40,
            "ALLOWED_HOSTS": "127.0.0.1", "BEHIND_TLS_PROXY": "0", "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "config.settings"}


def database_url() -> str:
    s = connection.settings_dict
    return (f"postgres://{s['USER']}:{s['PASSWORD'] or ''}@{s['HOST'] or '127.0.0.1'}:"
            f"{s['PORT'] or 5432}/{s['NAME']}")


class Server:
    def __init__(self, tmp_path: Path, static_root: Path, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_dir = tmp_path / "metrics"
        # The tests' own secret key, so that sessions made here (force_login) are valid there.
        self.env = {**os.environ, **production_env(), "SECRET_KEY": settings.SECRET_KEY,
                    "DATABASE_URL": database_url(),
                    "CACHE_URL": REDIS_URL, "STATIC_ROOT": str(static_root),
                    "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir), **env}
        self.process: subprocess.Popen | None = None

    def start(self, workers: int = 2) -> "Server":
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "config/gunicorn.py",
             "--workers", str(workers), "--bind", f"127.0.0.1:{self.port}"],
            cwd=ROOT, env=self.env, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.get("/healthz")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.2)
        raise AssertionError("gunicorn did not answer /healthz within 30 s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def get(self, path: str, **headers: str) -> tuple[int, bytes]:
        return self.request("GET", path, None, **headers)

    def post(self, path: str, body: bytes, **headers: str) -> tuple[int, bytes]:
        return self.request("POST", path, body, **headers)

    def login(self, username: str, password: str) -> tuple[int, bytes]:
        """The login form as a browser posts it: its CSRF cookie and token, then the POST.
        Each request is a new connection, so gunicorn's workers take them as they come."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", "/en/accounts/login/")
            page = conn.getresponse()
            html = page.read().decode()
            cookie = page.getheader("Set-Cookie", "").split(";")[0]
        finally:
            conn.close()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
        form = urlencode({"csrfmiddlewaretoken": token, "username": username,
                          "password": password}).encode()
        return self.post("/en/accounts/login/", form, Cookie=cookie,
                         **{"Content-Type": "application/x-www-form-urlencoded"})

    def request(self, method: str, path: str, body: bytes | None, **headers: str
                ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@pytest.fixture
def server(transactional_db, tmp_path, static_root):
    """A gunicorn server on the test database (stopped before the tables are emptied)."""
    redis.Redis.from_url(REDIS_URL).flushdb()
    servers: list[Server] = []

    def start(**env: str) -> Server:
        servers.append(Server(tmp_path, static_root, **env).start())
        return servers[-1]

    yield start
    for running in servers:
        running.stop()
