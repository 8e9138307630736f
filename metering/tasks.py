from datetime import datetime

from celery import shared_task

from metering.usage import rebuild_rollups


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def recount_rollups(start: str, end: str) -> int:
    """Rebuild the hourly rollups of [start, end) from raw samples (ISO 8601 bounds)."""
    return rebuild_rollups(datetime.fromisoformat(start), datetime.fromisoformat(end))
