"""deploy/nginx/gpuloans.conf, run by Debian's nginx in front of gunicorn: slow clients that
hold gunicorn's sync workers when they reach it directly wait in nginx instead, and the
application keeps answering."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from metering.models import Node
from tests.helpers import free_port

pytestmark = pytest.mark.postgresql

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
WORKERS = 2


def nginx_config(folder: Path, listen: int, upstream: int) -> Path:
    """The shipped server block, pointed at this test's ports, inside a minimal main file."""
    site = (ROOT / "deploy/nginx/gpuloans.conf").read_text()
    site = site.replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream};")
    site = site.replace("listen 80;", f"listen 127.0.0.1:{listen};")
    assert f"127.0.0.1:{upstream}" in site and f"127.0.0.1:{listen}" in site
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (folder / sub).mkdir(exist_ok=True)
    main = folder / "nginx.conf"
    main.write_text(f"""
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    {site}
}}
""")
    return main


@pytest.fixture
def nginx(tmp_path):
    processes = []

    def start(upstream: int) -> int:
        port = free_port()
        config = nginx_config(tmp_path, port, upstream)
        check = subprocess.run([NGINX, "-t", "-c", str(config), "-p", str(tmp_path)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        processes.append(subprocess.Popen(
            [NGINX, "-c", str(config), "-p", str(tmp_path), "-g", "daemon off;"]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return port
            except OSError:
                time.sleep(0.1)
        raise AssertionError("nginx did not listen within 10 s")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def slow_clients(port: int, count: int, token: str) -> list[socket.socket]:
    """Connections that each send half a request and then nothing: half of them stop inside
    the headers, half inside the chunked body of an agent's batch (with a valid token, so the
    application reads on)."""
    held = []
    for k in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if k % 2:
            sock.sendall(b"POST /api/v1/samples HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Authorization: Bearer " + token.encode() + b"\r\n"
                         b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n"
                         b"\r\n10\r\n{\"node\": \"gpu-")
        else:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        held.append(sock)
    return held


def healthz(port: int, timeout: float) -> int | None:
    """The status of GET /healthz, or None when nothing answers within `timeout` seconds."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            first = sock.recv(64)
    except OSError:
        return None
    return int(first.split()[1]) if first.startswith(b"HTTP/") else None


def test_slow_clients_starve_gunicorn_alone_but_not_behind_nginx(server, nginx):
    token = Node.objects.create(name="gpu-node-01").issue_token()
    app = server(TRUSTED_PROXIES="127.0.0.1/32")  # two sync workers
    front = nginx(app.port)
    assert healthz(front, 5) == 200

    # Straight at gunicorn: as many slow clients as workers, and /healthz gets no answer.
    held = slow_clients(app.port, WORKERS, token)
    time.sleep(0.5)
    assert healthz(app.port, 3) is None
    for sock in held:
        sock.close()
    time.sleep(0.5)
    assert healthz(app.port, 10) == 200

    # Through nginx: fifty of them, and every check answers at once.
    held = slow_clients(front, 50, token)
    time.sleep(0.5)
    started = time.monotonic()
    assert [healthz(front, 3) for _ in range(10)] == [200] * 10
    assert time.monotonic() - started < 5
    for sock in held:
        sock.close()
