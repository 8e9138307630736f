"""Settings come from the environment and refuse bad values loudly, before anything starts."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "a-production-secret-key-that-is-long-and-random-0123456789-abcdefghij",
    "ALLOWED_HOSTS": "gpuloans.example.com",
    "DATABASE_URL": "sqlite:///:memory:",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    """manage.py with development settings (DEBUG=1) unless `env` says otherwise; a value of
    None leaves the variable unset."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "TIME_ZONE", "CELERY_BROKER_URL")}
    env = {k: v for k, v in {"DEBUG": "1", **env}.items() if v is not None}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **env},
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize(("env", "message"), [
    ({"DEBUG": "0"}, "SECRET_KEY must be set when DEBUG is off."),
    ({"DEBUG": None}, "SECRET_KEY must be set when DEBUG is off."),  # unset: off, closed
    ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
    ({"DATABASE_URL": "mysql://db/gpuloans"}, "gpuloans supports sqlite:/// and postgres://"),
    ({"DATABASE_URL": "nonsense"}, "DATABASE_URL is not usable"),
    ({"TIME_ZONE": "Mars/Olympus"}, "TIME_ZONE='Mars/Olympus' is not an IANA time zone."),
    ({"CELERY_BROKER_URL": "carrier-pigeon://loft"}, "CELERY_BROKER_URL='carrier-pigeon://loft'"),
    ({"RAW_RETENTION_DAYS": "0"}, "RAW_RETENTION_DAYS=0 is below the minimum of 1."),
    ({"LATE_DATA_GRACE_HOURS": "two"}, "LATE_DATA_GRACE_HOURS='two' is not an integer."),
    ({"DEFAULT_CURRENCY": "RMB1"}, "DEFAULT_CURRENCY='RMB1' is not an ISO 4217 code."),
    ({"BURST_HOURS_PERCENT": "101"}, "BURST_HOURS_PERCENT=101 is above 100."),
    ({**PRODUCTION, "ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS must be set when DEBUG is off"),
])
def test_a_bad_setting_stops_start_up_with_a_message_naming_it(env, message):
    result = manage("check", **env)
    assert result.returncode != 0
    # One line naming the setting, not Django's traceback of ImproperlyConfigured.
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("gpuloans: ") and message in line


def test_the_defaults_need_no_server_and_pass_the_checks(tmp_path):
    result = manage("check", GPULOANS_VAR_DIR=str(tmp_path), DATABASE_URL="")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "celery-broker" / "queue").is_dir()


def test_deploy_checks_leave_only_what_the_reverse_proxy_supplies():
    result = manage("check", "--deploy", "--fail-level", "ERROR", **PRODUCTION)
    assert result.returncode == 0, result.stderr
    warnings = sorted(re.findall(r"^\?: \((security\.\w+)\)", result.stderr, re.MULTILINE))
    # HSTS and the HTTP->HTTPS redirect are the proxy's job (README, "Production").
    assert warnings == ["security.W004", "security.W008"], result.stderr
    assert "2 issues" in result.stderr


def test_production_cookies_are_secure_and_the_proxy_is_trusted_for_https():
    code = ("from django.conf import settings as s; "
            "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER)")
    result = manage("shell", "--no-imports", "-c", code, **PRODUCTION)
    assert result.stdout.split()[-4:] == ["True", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')"]


def test_production_hashes_passwords_slowly_and_keeps_session_cookies_from_scripts():
    code = ("from django.conf import settings as s; "
            "print(s.PASSWORD_HASHERS[0].rsplit('.', 1)[-1], s.SESSION_COOKIE_HTTPONLY, "
            "s.X_FRAME_OPTIONS)")
    result = manage("shell", "--no-imports", "-c", code, **PRODUCTION)
    assert result.stdout.split()[-3:] == ["PBKDF2PasswordHasher", "True", "DENY"]


def test_without_collected_static_files_the_web_server_refuses_to_start(tmp_path):
    """Outside DEBUG every page names hashed static files; without them each would be a 500."""
    result = subprocess.run(
        [sys.executable, "-c", "import config.wsgi"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, **PRODUCTION, "STATIC_ROOT": str(tmp_path)}, timeout=120)
    assert result.returncode != 0
    assert "run `python manage.py collectstatic --no-input`" in result.stderr
    assert str(tmp_path) in result.stderr


def test_production_language_cookie_is_secure_and_kept_from_scripts():
    code = ("from django.conf import settings as s; print(s.LANGUAGE_COOKIE_SECURE, "
            "s.LANGUAGE_COOKIE_HTTPONLY, s.LANGUAGE_COOKIE_SAMESITE)")
    result = manage("shell", "--no-imports", "-c", code, **PRODUCTION)
    assert result.stdout.split()[-3:] == ["True", "True", "Lax"]


def test_a_missing_setting_is_one_line_naming_it_not_a_traceback():
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "gpuloans: SECRET_KEY must be set when DEBUG is off. For development, set DEBUG=1 (make "
        "test does); for a command against the demo, run it with ./scripts/demo-manage."]


def test_a_command_runs_against_the_demo_with_its_settings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    env.update(demo_var=str(tmp_path), GPULOANS_VAR_DIR=str(tmp_path))
    result = subprocess.run([str(ROOT / "scripts" / "demo-manage"), "shell", "--no-imports",
                             "-c", "from django.conf import settings; print(settings.DEBUG)"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "False"  # production settings, as the demo runs
    assert (tmp_path / "secret-key").is_file()
