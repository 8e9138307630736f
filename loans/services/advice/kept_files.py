"""A history file kept for the next try of a refused advice form (loans.web.advise: a
browser cannot fill a file field again), for its uploader only.

Kept through Django's storage API in the `uploads` storage (settings.STORAGES: a folder under
var/ by default; where several web hosts serve, a storage they share), never in the cache,
where the rate counters live: at most ADVICE_KEPT_BYTES a person (the oldest go first), and
never past KEPT_SECONDS (refused when older, deleted by the hourly purge)."""

import re
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.utils import timezone

KEPT_SECONDS = 3600
TOKEN = re.compile(r"[A-Za-z0-9_-]{22}")  # secrets.token_urlsafe(16)
FOLDER = "advice"


def _storage():
    return storages["uploads"]


def _folder(user_id: int) -> str:
    return f"{FOLDER}/{int(user_id)}"


def keep(user_id: int, name: str, text: str) -> str:
    """Keeps the file; returns the token the form sends back. Makes room in the person's
    quota first, the oldest files going."""
    data = text.encode("utf-8")
    label = " ".join(name.split())[:200]
    _make_room(user_id, len(data) + len(label) + 1)
    token = secrets.token_urlsafe(16)
    _storage().save(f"{_folder(user_id)}/{token}", ContentFile(label.encode() + b"\n" + data))
    return token


def kept(user_id: int, token: str, now: datetime | None = None) -> tuple[str, str] | None:
    """(name, text) of the person's kept file, or None: unknown, another's, or too old."""
    if not TOKEN.fullmatch(token or ""):
        return None
    path, storage = f"{_folder(user_id)}/{token}", _storage()
    try:
        if _age(storage, path, now) > timedelta(seconds=KEPT_SECONDS):
            storage.delete(path)
            return None
        with storage.open(path, "rb") as handle:
            label, _, data = handle.read().partition(b"\n")
    except (FileNotFoundError, OSError):
        return None
    return label.decode("utf-8", errors="replace"), data.decode("utf-8", errors="replace")


def _age(storage, path: str, now: datetime | None) -> timedelta:
    return (now or timezone.now()) - storage.get_modified_time(path)


def _files(user_id: int) -> list[tuple[datetime, int, str]]:
    """(modified, size, path) of the person's kept files, oldest first."""
    storage, folder = _storage(), _folder(user_id)
    try:
        _dirs, names = storage.listdir(folder)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        path = f"{folder}/{name}"
        try:
            out.append((storage.get_modified_time(path), storage.size(path), path))
        except FileNotFoundError:
            continue
    return sorted(out)


def _make_room(user_id: int, wanted: int) -> None:
    storage, files = _storage(), _files(user_id)
    used = sum(size for _at, size, _path in files)
    while files and used + wanted > settings.ADVICE_KEPT_BYTES:
        _at, size, path = files.pop(0)
        storage.delete(path)
        used -= size


def purge(now: datetime | None = None) -> int:
    """Deletes every kept file older than KEPT_SECONDS; returns how many."""
    storage, deleted = _storage(), 0
    try:
        people, _names = storage.listdir(FOLDER)
    except FileNotFoundError:
        return 0
    for person in people:
        if not person.isdigit():
            continue
        for _at, _size, path in _files(int(person)):
            if _age(storage, path, now) > timedelta(seconds=KEPT_SECONDS):
                storage.delete(path)
                deleted += 1
    return deleted
