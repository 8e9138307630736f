"""Bearer tokens, as nodes and people send them: random strings shown once, stored as their
SHA-256 hash (a 256-bit random token needs no slow KDF), read from one header format."""

import hashlib


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def bearer_token(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, or None."""
    scheme, _space, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
