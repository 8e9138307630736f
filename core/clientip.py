"""The client's address: REMOTE_ADDR, unless that is a trusted proxy (TRUSTED_PROXIES), in
which case the right-most address in X-Forwarded-For that is not itself a trusted proxy. A
client cannot choose its address by sending the header: what it sends sits to the left of
what our proxy appends, and is read only past proxies we trust."""

import ipaddress

from django.conf import settings


def _address(raw: str):
    try:
        return ipaddress.ip_address(raw.strip())
    except ValueError:
        return None


def _trusted(address) -> bool:
    return address is not None and any(address in network
                                       for network in settings.TRUSTED_PROXIES)


def client_ip(request) -> str:
    remote = _address(request.META.get("REMOTE_ADDR", ""))
    if not _trusted(remote):
        return str(remote) if remote is not None else ""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
    for raw in reversed(forwarded):
        address = _address(raw)
        if address is None:
            break  # a malformed hop: trust nothing further left
        if not _trusted(address):
            return str(address)
    return str(remote)
