"""The actors of every test: a lead and a member of one tenant, the lead of another (the
outsider), and an operator; plus a plan and an active contract."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.servers.basehttp import WSGIServer
from django.db import connection
from django.test.testcases import LiveServerThread
from django.utils import translation
from whitenoise.middleware import WhiteNoiseMiddleware

from loans.models import Contract, Membership, Plan, RequiredAlert, Tenant
from metering import partitions
from metering.intake.ingest import forget_gpus
from metering.models import Node
from tests import schema_cache
from tests.slurm import Slurm
from tests.tiers import mark_tiers, register_profiles

PASSWORD = "a-long-test-password"
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

register_profiles()


def pytest_collection_modifyitems(config, items):
    mark_tiers(items)


def make_user(username: str, *, staff: bool = False):
    return get_user_model().objects.create_user(
        username=username, password=PASSWORD, is_staff=staff, is_superuser=staff
    )


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The tests make many users; production's slow hash would cost a second for every few.
    The hash in production is Django's default (PBKDF2), which tests/test_settings.py checks."""
    settings.PASSWORD_HASHERS = FAST_HASHERS


NODES_REGISTERED = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _nodes_registered_long_ago(monkeypatch):
    """A node a test makes was registered long ago (NODES_REGISTERED), as the demo's are set
    back: most tests post history, some of it in 2026's first months, which intake accepts
    only from a node's registration (DESIGN.md, "Trust"). The tests of that rule give a node
    its `created_at`."""
    # Django reads a field's default through its cached _get_default.
    monkeypatch.setattr(Node._meta.get_field("created_at"), "_get_default",
                        lambda: NODES_REGISTERED)


@pytest.fixture(scope="session")
def _uploads_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("uploads")


@pytest.fixture(autouse=True)
def _uploads_in_a_temporary_folder(settings, _uploads_folder, request):
    """Kept advice files go to a folder of the test's own (made when a file is saved), not
    the checkout's var/."""
    settings.STORAGES = {**settings.STORAGES, "uploads": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(_uploads_folder / str(abs(hash(request.node.nodeid))))}}}


@pytest.fixture(autouse=True)
def _history_within_the_horizon(settings):
    """Tests post history late on purpose (late data of closed periods, a month posted at
    once): the back-fill horizon reaches as far as raw retention. The tests of the horizon
    (tests/metering/intake/test_trust.py) set the default, 7 days."""
    settings.BACKFILL_HORIZON_DAYS = 3650


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a fresh process would: English, no cached GPUs, partitions or
    throttle counters (the database under them is rolled back between tests)."""
    yield
    translation.deactivate()
    forget_gpus()
    partitions.forget()
    cache.clear()


@pytest.fixture
def tenant(db) -> Tenant:
    return Tenant.objects.create(slug="vision", name="Vision Lab")


@pytest.fixture
def other_tenant(db) -> Tenant:
    return Tenant.objects.create(slug="speech", name="Speech")


@pytest.fixture
def lead(tenant):
    user = make_user("lead")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.LEAD)
    return user


@pytest.fixture
def member(tenant):
    user = make_user("member")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def outsider(other_tenant):
    user = make_user("outsider")
    Membership.objects.create(user=user, tenant=other_tenant, role=Membership.Role.LEAD)
    return user


@pytest.fixture
def operator(db):
    return make_user("operator", staff=True)


@pytest.fixture
def required_alerts(db) -> None:
    """The alert kinds migration 0037 makes required, written again: a transactional test
    elsewhere flushes the migration's rows."""
    for kind in ("guarantee_at_risk", "budget_used"):
        RequiredAlert.objects.get_or_create(kind=kind)


@pytest.fixture
def plan(db) -> Plan:
    return Plan.objects.create(
        name="H100 Guaranteed 8", gpu_model="NVIDIA H100 80GB HBM3", base_quota_gpus=8,
        max_quota_gpus=16, committed_gpu_hours=Decimal("1000"), committed_rate=Decimal("10.00"),
        term_months=12, currency="CNY",
    )


@pytest.fixture
def contract(tenant, plan) -> Contract:
    contract = Contract(tenant=tenant, plan=plan, starts_on=date(2026, 11, 1),
                        time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    return contract


class OneRequestAtATime(WSGIServer):
    """Django's development server without threads, taking (and ignoring) the connections
    override that LiveServerThread hands its server: the thread that serves already holds it."""

    def __init__(self, *args, connections_override=None, **kwargs):
        super().__init__(*args, **kwargs)


@pytest.fixture(scope="session", autouse=True)
def _one_request_at_a_time_on_in_memory_sqlite():
    """pytest-django's live server hands every request thread the test's own in-memory SQLite
    connection (the only one that sees the test's data). Two requests at once, a page and the
    chart it fetches, then share that connection, and they hung on each other for good (seen
    in CI: two request threads waiting inside SQLite). On SQLite the live server answers one
    request at a time (Django then closes each connection after its answer); on PostgreSQL
    every thread has a connection of its own and the server stays threaded."""
    if connection.vendor != "sqlite":
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LiveServerThread, "server_class", OneRequestAtATime)
        yield


@pytest.fixture(scope="session", autouse=True)
def _static_files_listed_once():
    """WhiteNoise lists every static file the finders know (the admin's, the API docs', Plotly)
    when its middleware is made, and Django's test client makes the middleware anew for every
    test: a seventh of the quick tier's time went there. The files do not change during a run,
    so the list is made once a process and handed to each new middleware."""
    listed: dict[str, dict] = {}
    original = WhiteNoiseMiddleware.add_files_from_finders

    def add_files_from_finders(self) -> None:
        if self.static_prefix not in listed:
            original(self)
            listed[self.static_prefix] = dict(self.files)
        else:
            self.files.update(listed[self.static_prefix])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WhiteNoiseMiddleware, "add_files_from_finders", add_files_from_finders)
        yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Just before the test databases are made: a new in-memory SQLite database takes the
    migrated schema kept for these migrations (tests/schema_cache.py)."""
    with pytest.MonkeyPatch.context() as patch:
        schema_cache.install(patch)
        yield


@pytest.fixture(scope="session")
def slurm(tmp_path_factory) -> Slurm:
    """A real Slurm controller and node (tests/slurm.py), one for the whole run."""
    cluster = Slurm(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()
