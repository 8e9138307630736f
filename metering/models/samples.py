"""Raw usage samples, their owners, hourly rollups and the raw horizon.

The sample table is lean on purpose: keyed by a small integer GPU id and the timestamp, no
surrogate id and no foreign-key checks, because it takes every sample the fleet sends.
"""

import hashlib

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _

from metering.models.devices import Gpu

# A sample's interval, in seconds (agent protocol v1): the database's check and the intake's
# parser read the same bounds.
MIN_INTERVAL_S, MAX_INTERVAL_S = 1, 3600
OWNER_KEYS = ("namespace", "pod", "container", "user", "account", "job")


class Owner(models.Model):
    """Who held a GPU, as agents report it (a pod of a namespace, a Slurm job of an account...):
    each distinct owner is stored once and samples refer to it by a small id."""

    id = models.AutoField(primary_key=True)
    digest = models.CharField(_("digest"), max_length=64, unique=True, editable=False)
    namespace = models.CharField(_("namespace"), max_length=253, blank=True)
    pod = models.CharField(_("pod"), max_length=253, blank=True)
    container = models.CharField(_("container"), max_length=253, blank=True)
    user = models.CharField(_("user"), max_length=253, blank=True)
    account = models.CharField(_("account"), max_length=253, blank=True)
    job = models.CharField(_("job"), max_length=253, blank=True)

    class Meta:
        verbose_name = _("owner")
        verbose_name_plural = _("owners")

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.as_dict().items()) or "-"

    def as_dict(self) -> dict[str, str]:
        return {key: getattr(self, key) for key in OWNER_KEYS if getattr(self, key)}

    @staticmethod
    def digest_of(owner: dict[str, str]) -> str:
        """The owner's key: the same dict gives the same digest in every process."""
        text = "\x1f".join(f"{key}={owner.get(key, '')}" for key in OWNER_KEYS)
        return hashlib.sha256(text.encode()).hexdigest()


class RealField(models.FloatField):
    """A float stored in four bytes on PostgreSQL (readings whose noise is far above it)."""

    def db_type(self, connection) -> str:
        return "real" if connection.vendor == "postgresql" else super().db_type(connection)


class UsageSample(models.Model):
    """One device over one interval, [ts, ts + interval_s), as an agent reported it.
    Idempotency key: (GPU, ts). A device's stored intervals never overlap.

    The row is lean on purpose (it is most of the database): small integer ids, the owner by
    id, readings in four bytes, and which node reported it kept by GpuTenure rather than on
    every row. On PostgreSQL the table is partitioned by day (migrations 0002, 0009)."""

    # Every index costs COPY speed: the key is the only one. On PostgreSQL it is ordered
    # (ts, gpu_id) (migration 0009), so samples arriving in time order append to it.
    pk = models.CompositePrimaryKey("gpu_id", "ts")
    gpu = models.ForeignKey(
        Gpu, verbose_name=_("GPU"), on_delete=models.DO_NOTHING, db_constraint=False,
        db_index=False,
    )
    ts = models.DateTimeField(_("time"))
    tenant = models.ForeignKey(
        "loans.Tenant", verbose_name=_("tenant"), on_delete=models.DO_NOTHING, db_constraint=False,
        null=True, db_index=False,
    )
    owner = models.ForeignKey(
        Owner, verbose_name=_("owner"), on_delete=models.DO_NOTHING, db_constraint=False, null=True,
        db_index=False,
    )
    interval_s = models.PositiveSmallIntegerField(_("interval (s)"))
    allocated = models.BooleanField(_("allocated"))
    fraction = models.FloatField(_("share"), default=1.0)  # billed: eight bytes
    util_pct = RealField(null=True)
    mem_used_mib = models.PositiveIntegerField(_("memory used (MiB)"), null=True)
    power_w = RealField(null=True)
    temp_c = models.SmallIntegerField(_("temperature (°C)"), null=True)
    # The agent asked the scheduler who held the device and got no answer: what it measured is
    # kept, but the interval counts as a gap in completeness, not as reported (migration 0011).
    holder_unknown = models.BooleanField(_("holder unknown"), default=False, db_default=False)

    class Meta:
        verbose_name = _("usage sample")
        verbose_name_plural = _("usage samples")
        constraints = [
            models.CheckConstraint(
                condition=Q(interval_s__gte=MIN_INTERVAL_S) & Q(interval_s__lte=MAX_INTERVAL_S),
                name="sample_interval_in_range",
            ),
            models.CheckConstraint(
                condition=Q(fraction__gt=0) & Q(fraction__lte=1), name="sample_fraction_in_range"
            ),
            models.CheckConstraint(
                condition=Q(util_pct__isnull=True) | (Q(util_pct__gte=0) & Q(util_pct__lte=100)),
                name="sample_util_is_a_percentage",
            ),
        ]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} at {self.ts:%Y-%m-%d %H:%M:%S}"

    @property
    def allocated_gpu_s(self) -> float:
        return self.interval_s * self.fraction if self.allocated else 0.0

    @property
    def busy_gpu_s(self) -> float:
        return self.allocated_gpu_s * (self.util_pct or 0.0) / 100


class HourlyRollup(models.Model):
    """Sums over one UTC hour. Seconds, not hours, so whole-GPU sums stay exact integers."""

    hour = models.DateTimeField(_("hour"))
    allocated_gpu_s = models.FloatField(_("allocated GPU-seconds"), default=0.0)
    busy_gpu_s = models.FloatField(_("busy GPU-seconds"), default=0.0)
    sample_count = models.PositiveIntegerField(_("samples"), default=0)
    peak_gpus = models.FloatField(
        _("peak GPUs"), default=0.0, help_text=_("Most GPUs allocated at one moment of the hour."),
    )
    reported_s = models.FloatField(
        _("reported seconds"), default=0.0, db_default=0.0,
        help_text=_("GPU-seconds the samples covered, held or not: against the wall clock, "
                    "the data's completeness."),
    )

    class Meta:
        abstract = True

    @property
    def allocated_gpu_hours(self) -> float:
        return self.allocated_gpu_s / 3600

    @property
    def busy_gpu_hours(self) -> float:
        return self.busy_gpu_s / 3600


# Unattributed usage has no tenant; COALESCE makes it one key (NULLs are otherwise all distinct).
NO_TENANT = Value(0)


class TenantHour(HourlyRollup):
    """A tenant's usage in one hour; tenant None is the unattributed usage.

    Its peak is the most GPUs the tenant held at one moment of the hour (samples overlapping
    in time, whatever their timestamps): exact only from all the hour's samples, so a batch
    raises it to what the batch alone shows and marks it stale, and metering.peaks recounts
    stale hours from the raw samples (every minute on PostgreSQL, with each batch on
    SQLite)."""

    tenant = models.ForeignKey(
        "loans.Tenant", verbose_name=_("tenant"), on_delete=models.PROTECT, null=True,
        db_index=False,
    )
    peak_stale = models.BooleanField(
        _("peak to recount"), default=False, db_default=False, editable=False,
    )

    class Meta:
        verbose_name = _("tenant hour")
        verbose_name_plural = _("tenant hours")
        constraints = [
            models.UniqueConstraint(
                "hour", Coalesce("tenant", NO_TENANT), name="tenant_hour_once"
            ),
        ]
        indexes = [
            # Covering the sums a span of hours adds up (the fleet's and the pages' periods):
            # read from the index alone, the fleet's 1,000 contracts' sums took 50 ms instead
            # of 101 (PostgreSQL; SQLite has no INCLUDE and keeps the plain index). The price:
            # a rollup's update is no longer HOT, one or two rows a batch on the ingest path.
            models.Index(fields=["tenant", "hour"], name="tenant_hour_by_tenant",
                         include=["allocated_gpu_s", "busy_gpu_s", "sample_count"]),
            models.Index(fields=["hour"], condition=Q(peak_stale=True),
                         name="tenant_hour_peak_stale"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant or _('unattributed')} {self.hour:%Y-%m-%d %H:00}"


class GpuHour(HourlyRollup):
    """One GPU's usage in one hour, per tenant that held it."""

    gpu = models.ForeignKey(Gpu, verbose_name=_("GPU"), on_delete=models.PROTECT)
    tenant = models.ForeignKey(
        "loans.Tenant", verbose_name=_("tenant"), on_delete=models.PROTECT, null=True,
        db_index=False,
    )

    class Meta:
        verbose_name = _("GPU hour")
        verbose_name_plural = _("GPU hours")
        constraints = [
            models.UniqueConstraint(
                "hour", "gpu", Coalesce("tenant", NO_TENANT), name="gpu_hour_once"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "hour"], name="gpu_hour_by_tenant")]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} {self.hour:%Y-%m-%d %H:00}"


class RawHorizon(models.Model):
    """How far back raw samples are complete: retention purged everything before
    `purged_before`. One row. Rollups of earlier hours can no longer be recounted, so rebuilds
    and re-attributions leave them as they are (rollups are kept forever)."""

    purged_before = models.DateTimeField(_("raw samples purged before"))

    class Meta:
        verbose_name = _("raw sample horizon")
        verbose_name_plural = _("raw sample horizon")

    def __str__(self) -> str:
        return f"raw samples from {self.purged_before:%Y-%m-%d %H:%M}"

    @classmethod
    def complete_from(cls):
        """The first instant whose raw samples are all kept, or None if nothing was purged."""
        row = cls.objects.order_by("-purged_before").first()
        return row.purged_before if row else None
