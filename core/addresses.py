"""Which addresses the application itself may call: public ones. A URL a tenant sets (a
webhook) is called from inside the network, so loopback, private, link-local, shared, metadata
and other non-global addresses are refused, unless WEBHOOK_ALLOWED_NETWORKS allows their
network. The host is resolved and every address it resolves to must pass; the caller then
connects to the address that was checked."""

import ipaddress
import socket
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


# IPv6 prefixes that carry an IPv4 address in their last 32 bits, which a translator or relay
# on the way reaches: NAT64's well-known and local-use prefixes (RFC 6052, RFC 8215).
NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to: mapped (::ffff:a.b.c.d), NAT64, 6to4
    (2002:aabb:ccdd::) and Teredo (the server and the client)."""
    out = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if any(address in network for network in NAT64):
        out.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.teredo is not None:
        out.extend(address.teredo)
    return out


def _allowed(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded(address)
        if address.ipv4_mapped:
            return _allowed(address.ipv4_mapped)  # ::ffff:127.0.0.1 is 127.0.0.1
        if inner and not all(_allowed(a) for a in inner):
            return False  # [64:ff9b::7f00:1] and [2002:7f00:1::1] lead to 127.0.0.1
    if any(address in network for network in settings.WEBHOOK_ALLOWED_NETWORKS):
        return True
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


def validate_public_url(url: str) -> None:
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
