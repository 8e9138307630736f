"""Posting to a tenant's webhook without being turned against our own network.

A webhook is a URL the application itself calls, so an address inside the network (the
database's port, a metadata service, loopback) would let a tenant's alerts probe it. The host
is resolved again at each delivery (core.addresses; the URL was checked when saved too), and
the connection goes to the address that was checked (a name that resolves differently a moment
later gains nothing). Redirects are never followed, and every failure reads the same: a
receiver learns nothing about which ports answer."""

import http.client
import json
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings

from core.addresses import Refused, resolve


class DeliveryError(Exception):
    """The receiver did not take the notification; worth retrying."""


class _Pinned(http.client.HTTPSConnection):
    """HTTPS to a checked address, with the name kept for SNI and the certificate."""

    def __init__(self, host: str, port: int, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class _PinnedPlain(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


def post(url: str, body: dict) -> int:
    """POST the body as JSON; a 2xx answer is delivery. Anything else (a refused address, no
    answer, a redirect, an error status) raises DeliveryError with one text."""
    failed = DeliveryError("webhook not delivered")
    try:
        host, port, scheme, address = resolve(url)
    except Refused:
        raise failed from None
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kind = _Pinned if scheme == "https" else _PinnedPlain
    connection = kind(host, port, address, settings.WEBHOOK_TIMEOUT_SECONDS)
    try:
        connection.request("POST", target, body=json.dumps(body).encode(), headers={
            "Content-Type": "application/json", "User-Agent": "gpuloans-alerts"})
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException):
        raise failed from None
    finally:
        connection.close()
    if not 200 <= status < 300:
        raise failed
    return status
