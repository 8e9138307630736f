"""deploy/nginx/gpuloans.conf, run by Debian's nginx in front of gunicorn: slow clients that
hold gunicorn's sync workers when they reach it directly wait in nginx instead, and the
application keeps answering."""

import shutil
import socket
import ssl
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


NAME = "gpuloans.example.com"


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for NAME, made for the test."""
    cert, key = folder / "gpuloans.pem", folder / "gpuloans.key"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={NAME}", "-addext", f"subjectAltName=DNS:{NAME}",
         "-keyout", str(key), "-out", str(cert)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return cert, key


def nginx_config(folder: Path, ports: dict[str, int], upstream: int) -> Path:
    """The shipped file, pointed at this test's ports and a test certificate, inside a
    minimal main file. ports: "http" and "https" for the file's own listeners, and "plain",
    a plain-HTTP listener added to the application's server (the slow clients speak no TLS)."""
    cert, key = make_certificate(folder)
    site = (ROOT / "deploy/nginx/gpuloans.conf").read_text()
    http, https, plain = (f"127.0.0.1:{ports[k]}" for k in ("http", "https", "plain"))
    for old, new in [
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream};"),
        ("listen 80 default_server;", f"listen {http} default_server;"),
        ("listen 443 ssl http2 default_server;", f"listen {https} ssl http2 default_server;"),
        ("listen 80;", f"listen {http};"),
        ("listen 443 ssl http2;", f"listen {https} ssl http2;\n    listen {plain};"),
        ("/etc/ssl/certs/gpuloans.pem", str(cert)),
        ("/etc/ssl/private/gpuloans.key", str(key)),
    ]:
        assert old in site, old
        site = site.replace(old, new)
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
    """start(upstream) runs the shipped file and returns its ports (nginx -t passes first)."""
    processes = []

    def start(upstream: int) -> dict[str, int]:
        ports = {name: free_port() for name in ("http", "https", "plain")}
        config = nginx_config(tmp_path, ports, upstream)
        check = subprocess.run([NGINX, "-t", "-c", str(config), "-p", str(tmp_path)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        processes.append(subprocess.Popen(
            [NGINX, "-c", str(config), "-p", str(tmp_path), "-g", "daemon off;"]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                for port in ports.values():
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return ports
            except OSError:
                time.sleep(0.1)
        raise AssertionError("nginx did not listen within 10 s")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def ask(port: int, host: str, tls: bool = False) -> bytes:
    """The raw answer to GET /healthz for `host` (b"" when nginx closes unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        sock = raw
        if tls:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            sock = context.wrap_socket(raw, server_hostname=host)
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                     .encode())
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, ssl.SSLError):
            pass
        return answer


def test_the_shipped_config_serves_its_own_name_over_tls_only(nginx):
    ports = nginx(free_port())  # no application behind it: nginx's own answers are tested
    redirect = ask(ports["http"], NAME)
    assert redirect.startswith(b"HTTP/1.1 301")
    assert f"Location: https://{NAME}/healthz".encode() in redirect
    assert ask(ports["http"], "evil.example") == b""  # any other name: closed unanswered
    assert ask(ports["http"], "127.0.0.1") == b""
    answer = ask(ports["https"], NAME, tls=True)
    assert answer.startswith(b"HTTP/1.1 502")  # reached the proxying server
    headers = answer.split(b"\r\n\r\n")[0].decode()
    assert "Strict-Transport-Security: max-age=31536000" in headers
    assert "Server: nginx\r\n" in headers + "\r\n"  # no version
    assert b"nginx/" not in answer
    assert ask(ports["https"], "evil.example", tls=True) == b""


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
    front = nginx(app.port)["plain"]
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
