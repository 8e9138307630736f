"""The in-memory SQLite test database, migrated once for a given set of migrations.

Migrating a new SQLite database takes about five seconds a test process (Django renders every
migration's model states), paid by every `make quick`. The result depends only on the
migration files (the project's, Django's and every installed app's) and the SQL files they
load, so it is kept under .pytest_cache, keyed by their contents, and copied into the next
run's database with SQLite's backup API. A changed migration is a new key: the database is
migrated again. PostgreSQL is always migrated for real.
"""

import functools
import hashlib
import os
import sqlite3
from pathlib import Path

import django
from django.apps import apps
from django.core import management
from django.db import connections

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / ".pytest_cache" / "schema"


@functools.cache
def fingerprint() -> str:
    digest = hashlib.sha256(django.get_version().encode())
    files = [p for config in apps.get_app_configs()
             for p in sorted((Path(config.path) / "migrations").glob("*.py"))]
    files += sorted((ROOT / "metering" / "sql").glob("*.sql"))
    for path in files:
        digest.update(str(path.relative_to(path.parents[2])).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


_call_command = management.call_command


def _new_in_memory_sqlite(alias: str) -> bool:
    """An in-memory SQLite database with no table yet: one the test run is creating (a test
    that migrates a database of its own is left alone)."""
    connection = connections[alias]
    return (connection.vendor == "sqlite"
            and connection.creation.is_in_memory_db(connection.settings_dict["NAME"])
            and not connection.introspection.table_names())


def call_command(name, *args, **options):
    """management.call_command, with `migrate` of a new in-memory SQLite database served from
    the kept copy where there is one (and kept where there is none)."""
    alias = options.get("database", "default")
    if name != "migrate" or not _new_in_memory_sqlite(alias):
        return _call_command(name, *args, **options)
    connection = connections[alias]
    kept = FOLDER / f"{fingerprint()}.sqlite3"
    if kept.is_file():
        connection.ensure_connection()
        with sqlite3.connect(kept) as source:
            source.backup(connection.connection)
        return None
    result = _call_command(name, *args, **options)
    FOLDER.mkdir(parents=True, exist_ok=True)
    partial = kept.with_suffix(f".{os.getpid()}.part")
    target = sqlite3.connect(partial)
    try:
        connection.connection.backup(target)
    finally:
        target.close()
    os.replace(partial, kept)  # two workers may write it at once: each writes a whole file
    return result


def install(patch) -> None:
    """Serve test databases' migrations through call_command above (`patch`: a MonkeyPatch;
    Django's test database creation imports call_command when it runs)."""
    patch.setattr(management, "call_command", call_command)
