"""Owners by id: each distinct owner dict an agent sends is stored once (metering.models.Owner)
and samples carry its id. Ids are remembered in the process, so a batch whose owners are known
(the common case) needs no query; new ones are inserted in one statement."""

from metering.intake.columns import each_object_once
from metering.models import OWNER_KEYS, Owner

CACHE_LIMIT = 100_000  # owners remembered per process; past it the memory starts again
_ids: dict[tuple, int] = {}


def key_of(owner: dict[str, str]) -> tuple:
    return tuple(owner.get(key, "") for key in OWNER_KEYS)


def ids_of(owners: list[dict | None]) -> list[int | None]:
    """The id of each owner (None for none), registering those never seen. Equal owners of a
    batch share one dict (metering.intake.wire), so each distinct object is looked at once."""
    def key(owner: dict | None) -> tuple | None:
        return None if owner is None else key_of(owner)

    keys = each_object_once(key, owners)
    missing = {k for k in set(keys) if k is not None and k not in _ids}
    if missing:
        _register(missing)
    return [None if k is None else _ids[k] for k in keys]


def _register(keys: set[tuple]) -> None:
    if len(_ids) + len(keys) > CACHE_LIMIT:
        _ids.clear()
    rows = [Owner(digest=Owner.digest_of(dict(zip(OWNER_KEYS, key, strict=True))),
                  **dict(zip(OWNER_KEYS, key, strict=True))) for key in keys]
    # Concurrent workers may insert the same owner: the digest is unique, the first one wins,
    # and everyone reads the ids back.
    Owner.objects.bulk_create(rows, ignore_conflicts=True)
    digests = {row.digest: key for row, key in zip(rows, keys, strict=True)}
    for pk, digest in Owner.objects.filter(digest__in=list(digests)).values_list("pk", "digest"):
        _ids[digests[digest]] = pk


def forget() -> None:
    """Drop the process's owner ids (tests rebuild the database under them)."""
    _ids.clear()
