from celery import shared_task
from django.utils import timezone

from loans.closing import close_due_periods


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def close_periods() -> str:
    """Write the statements that are due (hourly, from beat). Each statement is written in
    one transaction, so a failed run leaves none half-written and the retry resumes."""
    run = close_due_periods(timezone.now())
    return f"{len(run.written)} statements written over {run.contracts} contracts"
