"""Raw samples are kept for RAW_RETENTION_DAYS; hourly rollups forever."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from metering import partitions
from metering.models import RawHorizon, UsageSample


@dataclass(frozen=True)
class Purged:
    cutoff: datetime
    partitions_dropped: int
    rows_deleted: int


def purge_raw_samples(now: datetime) -> Purged:
    """Forget raw samples older than the retention window: whole daily partitions on
    PostgreSQL, rows on SQLite. Running it twice is harmless."""
    cutoff = now - timedelta(days=settings.RAW_RETENTION_DAYS)
    with transaction.atomic():
        dropped = partitions.drop_before(cutoff)
        deleted = 0
        if not partitions.is_partitioned():
            deleted, _ = UsageSample.objects.filter(ts__lt=cutoff).delete()
        # From here on the rollups of earlier hours can no longer be recounted.
        horizon = RawHorizon.objects.first()
        if horizon is None:
            RawHorizon.objects.create(purged_before=cutoff)
        elif horizon.purged_before < cutoff:
            RawHorizon.objects.filter(pk=horizon.pk).update(purged_before=cutoff)
    return Purged(cutoff, dropped, deleted)
