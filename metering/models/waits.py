"""Jobs that waited for GPUs, as each scheduler recorded them: what the floor's measure reads
(docs/guarantee.md). Slurm's come from its accounting (sacct), read in the accounting pass;
Kubernetes' from its API (Kueue Workloads or pods), listed every minute and kept here, since
the API forgets an object once it is gone."""

from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from metering.models.nodes import Cluster


class JobWait(models.Model):
    """One job (a Slurm job, a Kueue Workload, a pod) that asked for GPUs and did not start at
    once: when it was submitted, became eligible, started or ended, and why it last waited.
    Read again, the same row is updated (a job waiting at one pass has started, or been
    cancelled, by the next). `capacity` says whether its last reason was room (Slurm's
    Resources and Priority, or the scheduler's equivalent): a job that waits for a dependency,
    a begin time, a limit of its own account or gpuloans' own hold is not short of the floor."""

    class Scheduler(models.TextChoices):
        SLURM = "slurm", _("Slurm job")
        KUEUE = "kueue", _("Kueue workload")
        POD = "pod", _("pod")

    cluster = models.ForeignKey(Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE,
                                related_name="job_waits")
    scheduler = models.CharField(_("scheduler"), max_length=8, choices=Scheduler.choices)
    key = models.CharField(_("key"), max_length=100,
                           help_text=_("Slurm's job id; a Kubernetes object's uid."))
    name = models.CharField(_("job"), max_length=320,
                            help_text=_("As people name it: the job id, or namespace/name."))
    tenant = models.ForeignKey("loans.Tenant", verbose_name=_("tenant"), null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="job_waits",
                               help_text=_("By the cluster's attribution rules, when read."))
    account = models.CharField(_("account"), max_length=253, blank=True)
    user = models.CharField(_("user"), max_length=253, blank=True)
    namespace = models.CharField(_("namespace"), max_length=253, blank=True)
    gpus = models.PositiveIntegerField(_("GPUs asked for"))
    gpu_type = models.CharField(_("GPU type"), max_length=200, blank=True,
                                help_text=_("The scheduler's name for the GPU asked for; empty "
                                            "where the job named none."))
    submitted = models.DateTimeField(_("submitted"))
    eligible = models.DateTimeField(_("eligible"), null=True, blank=True)
    started = models.DateTimeField(_("started"), null=True, blank=True)
    ended = models.DateTimeField(_("ended"), null=True, blank=True)
    state = models.CharField(_("state"), max_length=32, blank=True)
    reason = models.CharField(_("last reason it waited"), max_length=64, blank=True)
    capacity = models.BooleanField(_("waited for room"))
    qos = models.CharField(_("QOS"), max_length=64, blank=True)
    message = models.TextField(_("the scheduler said"), blank=True)
    seen_at = models.DateTimeField(_("first read"))
    updated_at = models.DateTimeField(_("last read"))

    class Meta:
        ordering = ["-submitted", "cluster", "key"]
        verbose_name = _("job wait")
        verbose_name_plural = _("job waits")
        constraints = [
            models.UniqueConstraint(fields=["cluster", "scheduler", "key"],
                                    name="job_wait_once"),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="job_wait_asks_for_gpus"),
            models.CheckConstraint(
                condition=Q(started__isnull=True) | Q(started__gte=F("submitted")),
                name="job_wait_starts_after_submission"),
            models.CheckConstraint(condition=Q(scheduler__in=["slurm", "kueue", "pod"]),
                                   name="job_wait_scheduler_known"),
        ]
        indexes = [models.Index(fields=["tenant", "submitted"], name="job_wait_tenant"),
                   models.Index(fields=["cluster", "scheduler", "ended"],
                                name="job_wait_open")]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.name} ({self.gpus} GPUs)"
