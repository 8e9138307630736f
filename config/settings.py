"""gpuloans settings: one file, read from the environment.

Every value has an embedded default that needs no server (SQLite, a file-system Celery broker) so
that a fresh checkout runs; production points DATABASE_URL and CELERY_BROKER_URL at PostgreSQL and
Redis. A malformed value stops the process at start-up with a message naming the variable.
"""

import ipaddress
import os
import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("GPULOANS_VAR_DIR", BASE_DIR / "var"))


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name).lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_map(name: str, default: dict[str, str]) -> dict[str, str]:
    """`name=value` pairs separated by semicolons (values may hold spaces and commas):
    GPU_TYPE_MODELS="h100=NVIDIA H100 80GB HBM3; a100=NVIDIA A100-SXM4-80GB"."""
    raw = env_str(name)
    if not raw:
        return default
    out = {}
    for item in (part.strip() for part in raw.split(";")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ImproperlyConfigured(f"{name}: {item!r} is not written name=value.")
        out[key.strip()] = value.strip()
    return out


def database_from_url(url: str) -> dict:
    try:
        config = dj_database_url.parse(url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))
    except (ValueError, KeyError) as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not usable: {exc}") from None
    engine = config.get("ENGINE", "")
    if engine == "django.db.backends.sqlite3":
        # WAL lets the web process read while the Celery worker writes; IMMEDIATE takes the write
        # lock at BEGIN so two writers queue on the busy timeout instead of failing mid-transaction.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    elif engine == "django.db.backends.postgresql":
        # No health-check query before each request (it cost the ingestion path a round trip
        # per batch): a connection that broke fails its request with 503, the agent retries,
        # and Django drops the connection.
        config["CONN_HEALTH_CHECKS"] = False
        # No JIT: the pages' grouped sums are costed high enough to compile, and compiling
        # took 34 ms of the fleet's 140 ms query at 1,000 contracts; nothing here runs long
        # enough to win it back.
        config.setdefault("OPTIONS", {})["options"] = "-c jit=off"
    else:
        raise ImproperlyConfigured(
            f"DATABASE_URL uses {engine or 'an unknown engine'}; gpuloans supports "
            "sqlite:/// and postgres:// URLs."
        )
    return config


def celery_broker(url: str) -> tuple[str, dict]:
    scheme = urlsplit(url).scheme
    if scheme == "filesystem":
        # The embedded broker: messages are files under var/, shared by the web process, the
        # worker and beat on one machine, with no server to run.
        folder = VAR_DIR / "celery-broker"
        for sub in ("queue", "processed", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        return url, {
            # Without this kombu writes its exchange tables to ./control of whatever directory
            # the process started in.
            "control_folder": str(folder / "control"),
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "store_processed": False,
        }
    if scheme in ("redis", "rediss", "amqp", "amqps", "memory"):
        return url, {}
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={url!r}: use redis://host:6379/0 in production or filesystem:// "
        "for the embedded broker."
    )


# Off unless asked for: a deployment that forgets the variable fails closed (no debug pages,
# no development key). `make test` sets DEBUG=1; `make demo` runs production settings
# (scripts/demo-env), and scripts/demo-manage runs a command with them.
DEBUG = env_bool("DEBUG", False)

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off. For development, set DEBUG=1 "
            "(make test does); for a command against the demo, run it with "
            "./scripts/demo-manage.")
    SECRET_KEY = "development-only-not-secret"  # noqa: S105 - refused above outside DEBUG

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is off (comma-separated).")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# The reverse proxies in front of the application (deploy/nginx): from these, the client's
# address is read from X-Forwarded-For (core/clientip.py). None by default.
try:
    TRUSTED_PROXIES = [ipaddress.ip_network(item, strict=False)
                       for item in env_list("TRUSTED_PROXIES", [])]
except ValueError as exc:
    raise ImproperlyConfigured(f"TRUSTED_PROXIES: {exc}") from None

INSTALLED_APPS = [
    "config.admin.GpuLoansAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "config.vendor_texts.AxesConfig",  # django-axes, named for operators
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "loans",
    "metering",
    "config.audit.AuditConfig",  # django-auditlog, with who acted (config.audit)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.requestlog.RequestIdMiddleware",
    "metering.intake.middleware.AgentEndpointMiddleware",
    # Pages, API answers and CSVs compressed (static files come compressed from WhiteNoise, and
    # the agents' endpoint above answers before this). Django's GZip pads each answer at random
    # against BREACH-style guessing of secrets in compressed pages.
    "django.middleware.gzip.GZipMiddleware",
    # After the agents' endpoint, which answers JSON to agents and is the hot path: the policy
    # is for what a browser renders.
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "config.nul.RefuseNul",  # after the locale: the refusal is said in the reader's language
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.headers.PrivateByDefault",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # turns a locked-out login into its 429 page
    "core.audit.AuditMiddleware",  # a request's writes are its person's in the audit log
    "loans.web.sso.RefreshMiddleware",  # single sign-on's groups read again now and then
]

# The audit log (DESIGN's "Who logs in"): every model's saves and deletes, with before and
# after, but for what is metered (samples, rollups, the accounting's jobs and waits, the GPUs the
# agents report), the statements and their lines (immutable: each close is one entry naming what
# it wrote), refusals, the outbox and the login throttle's own records.
AUDITLOG_INCLUDE_ALL_MODELS = True
AUDITLOG_EXCLUDE_TRACKING_MODELS = (
    "auth.permission", "contenttypes", "sessions", "axes", "admin.logentry",
    "loans.pendingtask", "loans.statement", "loans.correctionline", "loans.sharingline",
    "loans.groupstatement", "metering.usagesample", "metering.tenanthour", "metering.gpuhour",
    "metering.rawhorizon", "metering.slurmjob", "metering.slurmhour", "metering.jobwait",
    "metering.devicerefusal", "metering.owner",
)
# Who is made an operator: a user's groups are logged as they change.
AUDITLOG_INCLUDE_TRACKING_MODELS = ({"model": "auth.user", "m2m_fields": ["groups"]},)
# Times the product keeps of its own reading (last use, last seen), not changes anyone made.
AUDITLOG_EXCLUDE_TRACKING_FIELDS = ("last_login", "last_used_at", "last_seen_at", "updated_at")
# Secrets are never written into the log, not even hashed.
AUDITLOG_MASK_TRACKING_FIELDS = ("password", "token_hash")
AUDITLOG_DISABLE_REMOTE_ADDR = False
# Values are shown whole on the audit pages (a recommendation's message, a reason), not cut.
AUDITLOG_CHANGE_DISPLAY_TRUNCATE_LENGTH = -1
# Axes first: it refuses a locked-out login before any password is checked; then the account
# ceiling (config/auth.py).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend",
                           "config.auth.AccountCeilingBackend",
                           "config.auth.LocalPasswordBackend"]

# Who logs in (DESIGN): local passwords only for these usernames where any are named (the
# break-glass operators, when everyone else signs in with the organisation's identity).
LOCAL_LOGIN_USERS = env_list("LOCAL_LOGIN_USERS", [])
# The directory's groups to tenants and roles, or the operators group, for single sign-on and
# LDAP (loans.services.identity.directory): "gpu-vision-leads=vision:lead; gpu-ops=operators".
DIRECTORY_GROUP_ROLES = env_map("DIRECTORY_GROUP_ROLES", {})
for _group, _target in DIRECTORY_GROUP_ROLES.items():
    if not re.fullmatch(r"operators|[a-z0-9][a-z0-9_-]*:(lead|member)", _target):
        raise ImproperlyConfigured(
            f"DIRECTORY_GROUP_ROLES: {_group}={_target} maps to neither TENANT:lead, "
            "TENANT:member nor operators.")
# OpenID Connect single sign-on (mozilla-django-oidc, loans.services.identity.oidc), on when a
# client id is set; the provider's endpoints as its discovery document names them.
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_USERINFO_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_JWKS_ENDPOINT")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile groups")
# The claim that lists a person's groups (names, or object ids as Microsoft Entra ID sends).
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# What the login page calls the button ("Sign in with Keycloak").
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "")
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
# A single sign-on's groups are read again (the person sent to the provider without a prompt)
# this often; the API, static files and the sign-on's own pages are never interrupted.
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = env_int("OIDC_REFRESH_MINUTES", 15, minimum=1) * 60
OIDC_EXEMPT_URLS = [re.compile(r"^/(api|static|sso|metrics)/")]
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
if OIDC_RP_CLIENT_ID:
    _missing = [name for name, value in (
        ("OIDC_CLIENT_SECRET", OIDC_RP_CLIENT_SECRET),
        ("OIDC_AUTHORIZATION_ENDPOINT", OIDC_OP_AUTHORIZATION_ENDPOINT),
        ("OIDC_TOKEN_ENDPOINT", OIDC_OP_TOKEN_ENDPOINT),
        ("OIDC_USERINFO_ENDPOINT", OIDC_OP_USER_ENDPOINT),
        ("OIDC_JWKS_ENDPOINT", OIDC_OP_JWKS_ENDPOINT)) if not value]
    if _missing:
        raise ImproperlyConfigured("OIDC_CLIENT_ID is set, so single sign-on needs "
                                   + ", ".join(_missing) + " too.")
    AUTHENTICATION_BACKENDS.append("loans.services.identity.oidc.Backend")
# LDAP logins (django-auth-ldap, loans.services.identity.ldap), on when a server is named: the
# person binds with their own password, found by LDAP_USER_FILTER under LDAP_USER_BASE; their
# groups are the groupOfNames under LDAP_GROUP_BASE that list them, by name (cn).
LDAP_SERVER_URI = env_str("LDAP_SERVER_URI")
if LDAP_SERVER_URI:
    try:
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, LDAPSearch
    except ImportError:
        raise ImproperlyConfigured("LDAP_SERVER_URI is set but django-auth-ldap is not "
                                   "installed: pip install '.[ldap]'.") from None

    AUTH_LDAP_SERVER_URI = LDAP_SERVER_URI
    AUTH_LDAP_BIND_DN = env_str("LDAP_BIND_DN")
    AUTH_LDAP_BIND_PASSWORD = env_str("LDAP_BIND_PASSWORD")
    AUTH_LDAP_START_TLS = env_bool("LDAP_START_TLS", False)
    AUTH_LDAP_USER_SEARCH = LDAPSearch(env_str("LDAP_USER_BASE"), ldap.SCOPE_SUBTREE,
                                       env_str("LDAP_USER_FILTER", "(uid=%(user)s)"))
    AUTH_LDAP_GROUP_SEARCH = LDAPSearch(env_str("LDAP_GROUP_BASE"), ldap.SCOPE_SUBTREE,
                                        env_str("LDAP_GROUP_FILTER", "(objectClass=groupOfNames)"))
    AUTH_LDAP_GROUP_TYPE = GroupOfNamesType()
    AUTH_LDAP_USER_ATTR_MAP = {"email": "mail", "first_name": "givenName", "last_name": "sn"}
    AUTH_LDAP_CONNECTION_OPTIONS = {ldap.OPT_NETWORK_TIMEOUT: 10}
    if not (env_str("LDAP_USER_BASE") and env_str("LDAP_GROUP_BASE")):
        raise ImproperlyConfigured("LDAP_SERVER_URI is set, so LDAP logins need LDAP_USER_BASE "
                                   "and LDAP_GROUP_BASE too.")
    AUTHENTICATION_BACKENDS.append("loans.services.identity.ldap.Backend")
# A login lasts at most this long, then the person signs in again (and the directory's groups
# are read again).
SESSION_COOKIE_AGE = env_int("SESSION_MAX_AGE_HOURS", 12, minimum=1) * 3600

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "loans.web.context_processors.site",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'gpuloans.sqlite3'}"
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

TIME_ZONE = env_str("TIME_ZONE", "Asia/Shanghai")
try:
    ZoneInfo(TIME_ZONE)
except (ZoneInfoNotFoundError, ValueError):
    raise ImproperlyConfigured(f"TIME_ZONE={TIME_ZONE!r} is not an IANA time zone.") from None
USE_TZ = True
USE_I18N = True
LANGUAGE_CODE = "en"
# Each language named in its own words: a reader finds theirs whatever the page's language.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
FORMAT_MODULE_PATH = ["config.formats"]  # dates in forms as the pages write them
LOCALE_PATHS = [BASE_DIR / "locale"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")
# Serve app assets (admin, API docs) straight from their packages too, so nothing depends on
# a collectstatic having run; collected files still win where they exist.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Advice files kept for a refused form's next try (loans.services.advice.kept_files), an
    # hour at most; where several web hosts serve, UPLOADS_ROOT is a folder they share.
    "uploads": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": env_str("UPLOADS_ROOT") or str(VAR_DIR / "uploads")}},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "config.static.CompressedServedStorage"
    },
}

# Production sits behind a reverse proxy that terminates TLS, redirects HTTP to HTTPS and sets
# Strict-Transport-Security (see README); the application trusts its X-Forwarded-Proto.
if env_bool("BEHIND_TLS_PROXY", not DEBUG):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
# Cookies go only over HTTPS outside DEBUG. The demo runs production settings on plain HTTP
# over loopback and turns this off (scripts/demo); nothing else should.
SECURE_COOKIES = env_bool("SECURE_COOKIES", not DEBUG)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
LANGUAGE_COOKIE_SECURE = SECURE_COOKIES
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
# Everything the pages, the admin, Plotly and the API docs load comes from this origin; no
# inline script runs anywhere (static/js/site.js holds the pages' behaviour). Plotly adds its
# own style rules at run time, hence inline styles.
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}}

EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpuloans@localhost")

CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = celery_broker(
    env_str("CELERY_BROKER_URL", "filesystem://")
)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TIMEZONE = TIME_ZONE
# The worker logs through LOGGING above (UTC times, the same format as the web tier), not a
# root logger of its own in local time.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Domain settings.
DEFAULT_CURRENCY = env_str("DEFAULT_CURRENCY", "CNY").upper()
if len(DEFAULT_CURRENCY) != 3 or not DEFAULT_CURRENCY.isalpha():
    raise ImproperlyConfigured(f"DEFAULT_CURRENCY={DEFAULT_CURRENCY!r} is not an ISO 4217 code.")
LATE_DATA_GRACE_HOURS = env_int("LATE_DATA_GRACE_HOURS", 2)
# A device reported by a new node moves there once its old node has been silent about it for
# this long; devices seen within the capacity window count in pools and in device limits.
DEVICE_MOVE_MINUTES = env_int("DEVICE_MOVE_MINUTES", 10, minimum=1)
CAPACITY_WINDOW_HOURS = env_int("CAPACITY_WINDOW_HOURS", 24, minimum=1)
# Slurm as a second meter and as the enforcer (metering.schedulers.slurm and
# loans.schedulers.slurm.limits):
# the cluster whose Slurm this server's client commands reach; empty: the beat jobs do nothing.
SLURM_CLUSTER = env_str("SLURM_CLUSTER")
SLURM_IMPORT_DAYS = env_int("SLURM_IMPORT_DAYS", 35, minimum=1)  # a first import reaches back
SLURM_APPLY_QUOTAS = env_bool("SLURM_APPLY_QUOTAS", False)  # contracts into Slurm limits
# ... and, with these, commitments and overage policies into GPU-minute budgets that Slurm
# enforces (loans.schedulers.slurm.budgets; the cluster needs AccountingStorageEnforce with safe).
SLURM_ADMISSION = env_bool("SLURM_ADMISSION", False)
# A tenant-day whose agents' and Slurm's GPU-hours differ by more than this share (and by at
# least SLURM_MISMATCH_MIN_GPU_HOURS) opens an alert.
SLURM_MISMATCH_PERCENT = env_int("SLURM_MISMATCH_PERCENT", 5, minimum=1)
SLURM_MISMATCH_MIN_GPU_HOURS = env_int("SLURM_MISMATCH_MIN_GPU_HOURS", 1)
# Who issues the statements: the InvoiceIssuerName and ProviderName of the FOCUS export.
INVOICE_ISSUER = env_str("INVOICE_ISSUER", "gpuloans")
RAW_RETENTION_DAYS = env_int("RAW_RETENTION_DAYS", 35, minimum=1)
# How far back a node's samples are accepted (and never before the node was registered): the
# agent's spool keeps batches as long (gpuloans-agent --spool-max-age-days).
BACKFILL_HORIZON_DAYS = env_int("BACKFILL_HORIZON_DAYS", 7, minimum=1)
INGEST_MAX_BODY_BYTES = env_int("INGEST_MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024)
INGEST_MAX_SAMPLES = env_int("INGEST_MAX_SAMPLES", 5000, minimum=1)
INGEST_REQUESTS_PER_MINUTE = env_int("INGEST_REQUESTS_PER_MINUTE", 120)  # per node; 0: no limit
# Unknown or revoked node tokens a client address may send in a minute before its unknown
# tokens answer 429 for the rest of the minute (token guessing; valid tokens from the address
# are not refused); 0: no limit.
INGEST_UNKNOWN_TOKENS_PER_MINUTE = env_int("INGEST_UNKNOWN_TOKENS_PER_MINUTE", 20)
# History files one user may have read on the advice pages in a minute; 0: no limit.
ADVICE_UPLOADS_PER_MINUTE = env_int("ADVICE_UPLOADS_PER_MINUTE", 6)
# Days a new personal API token lasts unless its issuer says otherwise.
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 90, minimum=1)
# What one person's refused advice files may hold, kept an hour for the next try; the oldest
# go first.
ADVICE_KEPT_BYTES = env_int("ADVICE_KEPT_BYTES", 16 * 1024 * 1024, minimum=1024)

# Prometheus at /metrics (config/metrics.py): a scraper sends METRICS_TOKEN as a bearer token or
# scrapes from one of METRICS_ALLOWED_NETWORKS (loopback unless set; "" allows none).
METRICS_TOKEN = env_str("METRICS_TOKEN")
try:
    METRICS_ALLOWED_NETWORKS = [
        ipaddress.ip_network(item)
        for item in env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])]
except ValueError as exc:
    raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {exc}") from None
METRICS_COMMITMENT_SECONDS = env_int("METRICS_COMMITMENT_SECONDS", 60)

# Alerts: projected overage or unused commitment beyond these shares of the commitment; a node
# silent for three agent intervals; operators' addresses for alerts no tenant owns.
ALERT_OVERAGE_PERCENT = env_int("ALERT_OVERAGE_PERCENT", 5)
ALERT_UNUSED_PERCENT = env_int("ALERT_UNUSED_PERCENT", 20)
NODE_SILENT_AFTER_SECONDS = env_int("NODE_SILENT_AFTER_SECONDS", 3 * 60, minimum=1)
ALERT_EMAILS = env_list("ALERT_EMAILS", [])
# Where people reach the pages: the links in e-mails, chat messages and digests.
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# The digests (loans.services.alerts.notices): the daily one at this UTC hour, the weekly one
# on this weekday (0 is Monday) at the same hour. A notice that fails is tried again with a
# doubling wait (30 s to an hour) up to NOTICE_MAX_ATTEMPTS times.
DIGEST_HOUR = env_int("DIGEST_HOUR", 7)
DIGEST_WEEKDAY = env_int("DIGEST_WEEKDAY", 0)
NOTICE_MAX_ATTEMPTS = env_int("NOTICE_MAX_ATTEMPTS", 30, minimum=1)
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
# Webhooks go to public addresses only; list networks here to allow private ones too
# ("10.20.0.0/16,fd00:1::/64"), for receivers inside the cluster.
try:
    WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network(item, strict=False)
                                for item in env_list("WEBHOOK_ALLOWED_NETWORKS", [])]
except ValueError as exc:
    raise ImproperlyConfigured(f"WEBHOOK_ALLOWED_NETWORKS: {exc}") from None
# The floor (docs/guarantee.md): each scheduler's GPU type names (Slurm's gres types,
# Kubernetes' resource names and node labels) as the plans' GPU models; an untyped request, or
# a type not named here, counts for a plan where its cluster has one model. An alert opens
# when a contract's availability is within GUARANTEE_ALERT_POINTS percentage points of its
# guarantee (or below it). Kubernetes clusters with an API address are listed this often.
GPU_TYPE_MODELS = env_map("GPU_TYPE_MODELS", {})
# A Slurm job whose accounting names no pending reason (slurmdbd seldom keeps one) waited for
# room when it waited this long past its Eligible; shorter, it waited for a scheduler cycle.
SLURM_WAIT_GRACE_SECONDS = env_int("SLURM_WAIT_GRACE_SECONDS", 60)
GUARANTEE_ALERT_POINTS = env_int("GUARANTEE_ALERT_POINTS", 1)
KUBERNETES_LIST_SECONDS = env_int("KUBERNETES_LIST_SECONDS", 60, minimum=10)
KUBERNETES_API_TIMEOUT_SECONDS = env_int("KUBERNETES_API_TIMEOUT_SECONDS", 10, minimum=1)
# Recommend another plan only when it would have been cheaper by this share.
PLAN_SWITCH_MARGIN_PERCENT = env_int("PLAN_SWITCH_MARGIN_PERCENT", 10)
# A dismissed or accepted recommendation is not raised again for 30 days unless its value moved
# by more than this share of it.
ADVICE_MOVE_PERCENT = env_int("ADVICE_MOVE_PERCENT", 10)
# The base quota advised leaves at most this share of the coming hours needing a burst.
BURST_HOURS_PERCENT = env_int("BURST_HOURS_PERCENT", 5)
if BURST_HOURS_PERCENT > 100:
    raise ImproperlyConfigured(f"BURST_HOURS_PERCENT={BURST_HOURS_PERCENT} is above 100.")
BURST_MAX_DAYS = env_int("BURST_MAX_DAYS", 31, minimum=1)

# Throttle counters: per process by default; point CACHE_URL at Redis to share them.
CACHE_URL = env_str("CACHE_URL")
if CACHE_URL and urlsplit(CACHE_URL).scheme not in ("redis", "rediss"):
    raise ImproperlyConfigured(f"CACHE_URL={CACHE_URL!r}: use redis://host:6379/2 or nothing.")
CACHES = {
    "default": {"BACKEND": "config.cache.ForgivingRedisCache", "LOCATION": CACHE_URL,
                "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# The most rows one page of a list endpoint returns (`?limit=`).
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 1000, minimum=1)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "loans.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's own parsers, the JSON one refusing NUL (config/nul.py).
    "DEFAULT_PARSER_CLASSES": ["config.nul.TextJSONParser",
                               "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "config.negotiation.OperatorsBrowse",
    "DEFAULT_PAGINATION_CLASS": "core.pagination.CappedPages",
    "PAGE_SIZE": 100,
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": env_str("API_RATE", "600/minute")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpuloans API",
    "DESCRIPTION": "Agent protocol v1 (POST /api/v1/samples), usage for "
    "integrations, and the operators' API.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "metering.intake.protocol_schema.add_agent_protocol",
        "config.openapi.add_error_responses",
        "core.api_docs.translate",  # last: every text in the reader's language
    ],
}

LOG_FORMAT = env_str("LOG_FORMAT", "plain").lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: use plain or json.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "config.requestlog.RequestIdFilter"},
                "client_faults": {"()": "config.requestlog.ClientFaultFilter"}},
    "formatters": {
        "plain": {"()": "config.requestlog.UtcFormatter",
                  "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "config.requestlog.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT,
                             "filters": ["request_id", "client_faults"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    # django-axes logs every successful login's reset at INFO; lockouts are warnings.
    # kombu warns "No hostname was supplied" for the filesystem broker, which has none.
    "loggers": {"axes": {"level": "WARNING"}, "kombu.connection": {"level": "ERROR"}},
}

# Failed logins allowed per username and client address before a lockout of this many
# minutes (django-axes, config/auth.py); the counts live in the database, shared by workers.
LOGIN_FAILURES_ALLOWED = env_int("LOGIN_FAILURES_ALLOWED", 5, minimum=1)
LOGIN_LOCKOUT_MINUTES = env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
# Failed logins of one username in an hour, from any addresses, past which it is slowed to
# one checked attempt every LOGIN_ACCOUNT_SLOW_SECONDS (config/auth.py); 0: no ceiling.
LOGIN_ACCOUNT_FAILURES_PER_HOUR = env_int("LOGIN_ACCOUNT_FAILURES_PER_HOUR", 50)
LOGIN_ACCOUNT_SLOW_SECONDS = env_int("LOGIN_ACCOUNT_SLOW_SECONDS", 30, minimum=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURES_ALLOWED
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_USERNAME_CALLABLE = "config.auth.username_of"
AXES_CLIENT_IP_CALLABLE = "core.clientip.client_ip"
AXES_LOCKOUT_CALLABLE = "config.auth.locked_out"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
