"""What Slurm's own accounting says each job held: the second meter beside the agents'
(metering.schedulers.slurm.accounting imports it; metering.usage.slurm reads it)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from metering.models.nodes import Cluster


class SlurmJob(models.Model):
    """One job as Slurm accounting (sacct) records it: its account, user, GPUs and run time.
    A running job has no end yet; the next import completes it (the same row, so never counted
    twice)."""

    cluster = models.ForeignKey(Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE,
                                related_name="slurm_jobs")
    job = models.CharField(_("job"), max_length=64)  # "1234", or "1234_5" for an array task
    account = models.CharField(_("account"), max_length=253)
    user = models.CharField(_("user"), max_length=253)
    gpus = models.PositiveIntegerField(_("GPUs"))
    start = models.DateTimeField(_("start"))
    end = models.DateTimeField(_("end"), null=True, blank=True,
                               help_text=_("Empty while the job runs."))
    state = models.CharField(_("state"), max_length=32)
    imported_at = models.DateTimeField(_("imported"))

    class Meta:
        verbose_name = _("Slurm job")
        verbose_name_plural = _("Slurm jobs")
        constraints = [models.UniqueConstraint(fields=["cluster", "job"],
                                               name="slurm_job_once")]
        indexes = [models.Index(fields=["cluster", "start"], name="slurm_job_start")]

    def __str__(self) -> str:
        return f"{self.cluster}: job {self.job} ({self.account}, {self.gpus} GPUs)"


class SlurmHour(models.Model):
    """GPU-seconds Slurm accounting says an account's user held in one UTC hour of a cluster:
    made from SlurmJob, rebuilt for the hours each import touched."""

    cluster = models.ForeignKey(Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE,
                                related_name="slurm_hours")
    account = models.CharField(_("account"), max_length=253)
    user = models.CharField(_("user"), max_length=253)
    hour = models.DateTimeField(_("hour"))
    gpu_s = models.FloatField(_("GPU-seconds"))

    class Meta:
        verbose_name = _("Slurm GPU-hour")
        verbose_name_plural = _("Slurm GPU-hours")
        constraints = [models.UniqueConstraint(fields=["cluster", "account", "user", "hour"],
                                               name="slurm_hour_once")]
        indexes = [models.Index(fields=["hour", "cluster"], name="slurm_hour_by_hour")]

    def __str__(self) -> str:
        return f"{self.cluster} {self.account} {self.hour:%Y-%m-%d %H:00}"
