"""Checks and helpers shared by the tests."""

import os
import socket

import pytest

from metering import peaks
from metering.models import GpuHour, TenantHour, UsageSample
from metering.rollups import recount
from metering.usage import sample_values


def assert_rollups_equal_a_recount() -> None:
    """Stored hourly rollups equal a recount of every raw sample (to 1e-9 GPU-s), once the
    stale peaks are recounted (on PostgreSQL a job does it every minute)."""
    peaks.refresh_all()
    rows = list(sample_values(UsageSample.objects.all()))
    by_tenant, by_gpu = recount(rows)
    stored = {(r.tenant_id, r.hour): r for r in TenantHour.objects.all()}
    assert set(stored) == set(by_tenant)
    for key, sums in by_tenant.items():
        row = stored[key]
        assert row.allocated_gpu_s == pytest.approx(sums.allocated_gpu_s, abs=1e-9), (
            key, row.allocated_gpu_s, sums)
        assert row.busy_gpu_s == pytest.approx(sums.busy_gpu_s, abs=1e-9), (key, row, sums)
        assert row.sample_count == sums.sample_count, (key, row.sample_count, sums)
        assert row.peak_gpus == pytest.approx(sums.peak_gpus, abs=1e-9), (key, row.peak_gpus,
                                                                         sums)
        assert row.reported_s == pytest.approx(sums.reported_s, abs=1e-9), (key, row.reported_s,
                                                                           sums)
    stored_gpu = {(r.gpu_id, r.tenant_id, r.hour): r for r in GpuHour.objects.all()}
    assert set(stored_gpu) == set(by_gpu)
    for key, sums in by_gpu.items():
        row = stored_gpu[key]
        assert row.allocated_gpu_s == pytest.approx(sums.allocated_gpu_s, abs=1e-9), key
        assert row.sample_count == sums.sample_count, key
        assert row.peak_gpus == pytest.approx(sums.peak_gpus, abs=1e-9), key
        assert row.reported_s == pytest.approx(sums.reported_s, abs=1e-9), key


def worker() -> int:
    """This process's number among pytest-xdist's workers (gw0, gw1, ...); 0 without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


# The Redis databases the tests use (each names one by its number here); the application's own,
# 0 to 2, are never used.
TEST_REDIS_DATABASES = (8, 9, 15)
MAX_WORKERS = (16 - 3) // len(TEST_REDIS_DATABASES)  # 4


def redis_url(db: int) -> str:
    """A Redis database of this worker's own for the test's database `db`: three a worker from
    database 3 on, so that up to four workers never flush or share each other's queues."""
    k = worker()
    if k >= MAX_WORKERS:
        raise RuntimeError(f"the tests' Redis databases serve {MAX_WORKERS} workers, not {k + 1}")
    number = 3 + len(TEST_REDIS_DATABASES) * k + TEST_REDIS_DATABASES.index(db)
    return f"redis://127.0.0.1:6379/{number}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
