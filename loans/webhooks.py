"""Where a webhook may point, and posting to it without being turned against our own network.

A tenant's webhook is a URL the application itself calls, so an address inside the network
(the database's port, a metadata service, loopback) would let a tenant's alerts probe it. The
host is resolved when the URL is saved and again at each delivery, and every address it
resolves to must be public unless WEBHOOK_ALLOWED_NETWORKS allows its network; the connection
then goes to the address that was checked (a name that resolves differently a moment later
gains nothing). Redirects are never followed, and every failure reads the same: a receiver
learns nothing about which ports answer."""

import http.client
import ipaddress
import json
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

# Names cloud providers give their instance-metadata service.
METADATA_NAMES = {"metadata", "metadata.google.internal", "metadata.goog",
                  "instance-data", "instance-data.ec2.internal"}
REFUSED = _("Use a public http(s) address; loopback, private, link-local and metadata "
            "addresses are refused.")


class Refused(Exception):
    """The URL points where webhooks may not go."""


class DeliveryError(Exception):
    """The receiver did not take the notification; worth retrying."""


def _allowed(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if any(address in network for network in settings.WEBHOOK_ALLOWED_NETWORKS):
        return True
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _host(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Refused from None
    host = parts.hostname.rstrip(".").lower()
    if host in METADATA_NAMES or host.endswith(".internal"):
        raise Refused
    return host, port, parts.scheme


def resolve(url: str) -> tuple[str, int, str, str]:
    """(host, port, scheme, the checked address to connect to), or Refused."""
    host, port, scheme = _host(url)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise Refused from None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in found]
    if not addresses or not all(_allowed(address) for address in addresses):
        raise Refused
    return host, port, scheme, str(addresses[0])


def validate_webhook_url(url: str) -> None:
    """For the model field: refuse an address that is not public now. A name that does not
    resolve here is kept (it is checked again at each delivery)."""
    try:
        host, _port, _scheme = _host(url)
        literal = ipaddress.ip_address(host.strip("[]"))
    except Refused:
        raise ValidationError(REFUSED, code="webhook") from None
    except ValueError:  # a name, not an address
        try:
            resolve(url)
        except Refused:
            try:
                socket.getaddrinfo(host, None)
            except (socket.gaierror, UnicodeError):
                return
            raise ValidationError(REFUSED, code="webhook") from None
        return
    if not _allowed(literal):
        raise ValidationError(REFUSED, code="webhook")


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
