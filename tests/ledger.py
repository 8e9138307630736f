"""Usage for the ledger tests, metered the way agents report it: samples through
metering.intake.ingest (protocol v1's validation, attribution and storage, without HTTP)."""

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from metering.intake import protocol
from metering.intake.ingest import ingest
from metering.models import AttributionRule, Node

HOUR = timedelta(hours=1)
JAN, FEB, MAR = (datetime(2026, m, 1, tzinfo=UTC) for m in (1, 2, 3))
GRACE = timedelta(hours=3)  # past the late-data grace after a period's end


def months_later(day: date, months: int) -> date:
    """The same day `months` later, or the month's last where it is shorter (as a model of
    the product's billing periods, written from the calendar)."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    last = [31, 29 if year % 4 == 0 else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return date(year, month, min(day.day, last))


def midnight(day: date, zone: str) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(zone)).astimezone(UTC)


@pytest.fixture
def long_retention(settings):
    """Late samples of closed periods in 2026 are still within raw retention."""
    settings.RAW_RETENTION_DAYS = 3650


def attribute(tenant, namespace: str | None = None) -> None:
    """Samples owned by this namespace (the tenant's slug by default) are the tenant's."""
    AttributionRule.objects.get_or_create(field="namespace", value=namespace or tenant.slug,
                                          defaults={"tenant": tenant})


def node(name: str = "gpu-node-01") -> Node:
    return Node.objects.get_or_create(name=name)[0]


def meter(namespace: str | None, start: datetime, hours: int, *, gpus: int = 1, at=None,
          gpu_prefix: str = "GPU", on: Node | None = None, util: float = 50.0) -> int:
    """`gpus` GPUs held by `namespace` (None: no owner) for `hours` whole hours from `start`,
    one 3600 s sample each, reported at `at` (default: just after the last hour). Returns
    how many samples were accepted."""
    on = on or node()
    samples = [
        {"gpu_uuid": f"{gpu_prefix}-{g:04d}", "ts": (start + k * HOUR).isoformat(),
         "interval_s": 3600, "allocated": True, "util_pct": util,
         "owner": {"namespace": namespace} if namespace else None}
        for k in range(hours) for g in range(gpus)]
    now = at or start + hours * HOUR
    accepted = 0
    for first in range(0, len(samples), 500):
        envelope = protocol.Envelope(on.name, "test", 0, samples[first:first + 500])
        result = ingest(on, envelope, now=now)
        assert result.rejected == [], result.rejected
        accepted += result.accepted
    return accepted
