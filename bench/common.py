"""What the benchmarks share: a database made afresh for each run, and the application in
process under production settings (DEBUG off) for the in-process ones."""

import functools
import os
import subprocess
import sys
import warnings
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
# Static files are served from the packages; a bench has no collected directory, and WhiteNoise
# would warn of it in every process. For a server's environment:
QUIET_STATIC = {"PYTHONWARNINGS": "ignore:No directory at"}


@functools.cache
def served_static() -> dict[str, str]:
    """A production web server refuses to start without collected static files
    (config.static.require_collected): collect them into var/bench-static, once a run."""
    folder = ROOT / "var" / "bench-static"
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"],
                   cwd=ROOT, check=True, env={
                       **os.environ, "DEBUG": "0", "SECRET_KEY": SECRET,
                       "ALLOWED_HOSTS": "127.0.0.1", "STATIC_ROOT": str(folder)})
    return {"STATIC_ROOT": str(folder)}


def database_url(default_name: str) -> str:
    return os.environ.get("BENCH_DATABASE_URL",
                          f"postgres://postgres@127.0.0.1:5432/{default_name}")


def recreate_database(url: str) -> None:
    """Drop and create the benchmark's database (its name is the URL's path)."""
    name = urlsplit(url).path.lstrip("/")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


# Raw rows written on purpose without rollups (the raw-COPY baseline, padding for a big sample
# table): in a session so set, PostgreSQL fires no ordinary trigger, the one that adds inserted
# samples to the rollups included (migration metering 0004). Only a superuser may set it.
WITHOUT_ROLLUPS = "SET session_replication_role = replica"


def without_rollups(execute) -> None:
    """Run WITHOUT_ROLLUPS with `execute` (a cursor's or connection's), or stop with a clear
    message where the database user may not."""
    try:
        execute(WITHOUT_ROLLUPS)
    except Exception as error:
        refused = psycopg.errors.InsufficientPrivilege
        if isinstance(error, refused) or isinstance(error.__cause__, refused):
            raise SystemExit(
                "this benchmark writes raw samples without rollups, which needs a PostgreSQL "
                "superuser (session_replication_role); set BENCH_DATABASE_URL to one") from None
        raise


def node_tokens(code: str, env: dict, prefix: str) -> list[tuple[str, str]]:
    """Run `code` in the application's shell (it prints "name token" for each node it makes)
    and return the (name, token) pairs of the nodes whose names start with `prefix`."""
    out = subprocess.run([sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
                         cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return [tuple(line.split()) for line in out.stdout.splitlines() if line.startswith(prefix)]


def in_process(url: str) -> None:
    """Production settings for Django in this process, on the benchmark's database."""
    sys.path.insert(0, str(ROOT))
    os.environ.update({
        "DATABASE_URL": url, "DEBUG": "0", "ALLOWED_HOSTS": "testserver", "SECRET_KEY": SECRET,
        "DJANGO_SETTINGS_MODULE": "config.settings", "LOG_LEVEL": "WARNING",
    })
    warnings.filterwarnings("ignore", "No directory at")  # as QUIET_STATIC
