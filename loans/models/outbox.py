"""Jobs that could not be queued because the Celery broker was away: kept here, in the same
database as the event that asked for them, and queued by loans.tasks.flush_outbox once the
broker is back."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class PendingTask(models.Model):
    task = models.CharField(_("task"), max_length=200)
    args = models.JSONField(_("arguments"), default=list)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)

    class Meta:
        ordering = ["pk"]
        verbose_name = _("job waiting for the broker")
        verbose_name_plural = _("jobs waiting for the broker")

    def __str__(self) -> str:
        return f"{self.task} ({self.created_at:%Y-%m-%d %H:%M})"
