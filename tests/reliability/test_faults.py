"""Faults while agents post: each test fails if anything is lost or counted twice.

PostgreSQL itself is restarted (pg_ctlcluster, as the machine's administrator would), and the
gunicorn server is killed with SIGKILL mid-traffic and started again on the same port.
"""

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.reliability.fleet import Fleet

pytestmark = pytest.mark.postgresql


def restart_postgresql() -> None:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    command = shutil.which("pg_ctlcluster") or "/usr/bin/pg_ctlcluster"
    subprocess.run([command, "--skip-systemctl-redirect", version, "main", "restart",
                    "--mode", "fast"], check=True, capture_output=True, timeout=120)


def test_postgresql_restarted_mid_ingestion_loses_and_doubles_nothing(server, tmp_path, tenant):
    app = server(INGEST_REQUESTS_PER_MINUTE="0")
    fleet = Fleet(app.url, tmp_path, tenant, agents=6, gpus=8, minutes=90)

    def restart_soon() -> None:
        time.sleep(0.3)
        restart_postgresql()

    restarter = threading.Thread(target=restart_soon)
    restarter.start()
    fleet.deliver()
    restarter.join()
    connection.close()  # this process's connection died with the restart too

    fleet.assert_exactly_stored(tenant)
    assert fleet.refusals, "the restart should have refused some batches"
    assert all(m.startswith(("503", "server unreachable")) for m in fleet.refusals), \
        set(fleet.refusals)


def test_the_server_killed_mid_request_counts_each_retry_once(server, tmp_path, tenant):
    app = server(INGEST_REQUESTS_PER_MINUTE="0")
    fleet = Fleet(app.url, tmp_path, tenant, agents=6, gpus=8, minutes=100)
    delivery = threading.Thread(target=fleet.deliver)
    delivery.start()
    kills = 0
    while delivery.is_alive() and kills < 3:
        time.sleep(0.3)
        app.stop(9)  # SIGKILL: no graceful finish for the requests in flight
        kills += 1
        app.start()
    delivery.join()
    assert kills >= 1

    fleet.assert_exactly_stored(tenant)
    assert any(m.startswith("server unreachable") for m in fleet.refusals), set(fleet.refusals)
