"""The suite's tiers, set from what each test uses rather than written on each test.

- `slow`: drives a real browser, Slurm, nginx, gunicorn or a Celery process, or fuzzes; `make
  quick` leaves these out.
- `nodb`: touches no database (pytest-django would refuse it one), so it cannot differ between
  PostgreSQL and SQLite and runs on the PostgreSQL pass only.
- `serial`: must have the machine to itself (restarts PostgreSQL, loads both cores, times
  clients); make test runs these alone, after the rest has run on both cores (pytest-xdist).
- `browser`, `slurm`, `server`: which real outside part the test starts; they serve the same code
  whatever the database, so the SQLite pass leaves them out too.

Hypothesis runs under a profile: `ci` (the numbers each test asks for) or `dev` (a tenth of
them, for `make quick`), chosen with `--hypothesis-profile`. A test asks for its examples with
examples(n), so that the profile can scale them.
"""

from pathlib import Path

import pytest
from hypothesis import settings

# Fixtures that start an outside part, and the tier they put a test in.
PARTS = {
    "browser": "browser", "page": "browser",
    "slurm": "slurm",
    "server": "server", "live_server": "server", "static_root": "server",
    "slapd": "server",  # a real LDAP directory (tests/ldap.py)
}
# Modules whose tests start processes of their own (Celery workers, nginx, gunicorn, the agent
# as a process, grpc's compiler) or fuzz the whole API.
SLOW_MODULES = {
    "tests/test_celery.py", "tests/test_settings.py",
    "tests/reliability/test_proxy.py", "tests/reliability/test_faults.py",
    "tests/reliability/test_load.py", "tests/reliability/test_broker.py",
    "tests/reliability/test_demo_settings.py", "tests/reliability/test_api_fuzz.py",
    "tests/metering/intake/test_ingest_fuzz.py", "tests/metering/test_migration_lean_samples.py",
    "tests/agent/test_delivery.py", "tests/agent/test_independence.py",
    "tests/agent/holders/test_podresources_stubs.py", "tests/agent/holders/test_slurm.py",
    "tests/agent/holders/test_kubelet.py", "tests/loans/services/exports/test_focus_validator.py",
}
# Modules that must have the machine to themselves: one restarts PostgreSQL under every other
# session, one loads both cores for a minute, one times slow clients against gunicorn. make
# test runs them after the parallel pass, one at a time.
SERIAL_MODULES = {
    "tests/reliability/test_faults.py", "tests/reliability/test_load.py",
    "tests/reliability/test_proxy.py",
}
# Single tests that fuzz or walk every form.
SLOW_TESTS = {
    "test_add_forms_prefilled_from_the_query_string_never_fail",
    "test_a_posted_key_its_field_cannot_read_is_a_form_error_not_a_500",
    "test_pip_install_of_the_agent_puts_none_of_the_server_on_a_gpu_node",  # a venv, pip
}
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences",
                     "django_db_serialized_rollback"}
ROOT = Path(__file__).resolve().parent.parent
CI_EXAMPLES = 100


def register_profiles() -> None:
    settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None)
    settings.register_profile("dev", max_examples=CI_EXAMPLES // 10, deadline=None)
    settings.load_profile("ci")


def examples(n: int) -> int:
    """n examples under the ci profile, scaled with the loaded profile's max_examples (a tenth
    of them, at least three, under dev)."""
    return max(3, round(n * settings.default.max_examples / CI_EXAMPLES))


def mark_tiers(items: list) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        module = item.path.relative_to(ROOT).as_posix()
        parts = {PARTS[name] for name in names & set(PARTS)}
        for part in parts:
            item.add_marker(part)
        if parts or module in SLOW_MODULES or item.originalname in SLOW_TESTS \
                or module.startswith("tests/browser/"):
            item.add_marker(pytest.mark.slow)
        if module in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
        if not (names & DATABASE_FIXTURES or item.get_closest_marker("django_db")):
            item.add_marker(pytest.mark.nodb)
