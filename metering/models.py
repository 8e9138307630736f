"""Nodes, GPUs, raw usage samples, hourly rollups and attribution rules.

metering knows a tenant only as a foreign key. The sample table is lean on purpose (see
shared PERFORMANCE notes): keyed by a small integer GPU id and the timestamp, no surrogate id and
no foreign-key checks, because it takes every sample the fleet sends.
"""

import hashlib
import hmac
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

TOKEN_PREFIX = "gpln_"

node_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$",
    _("Use 1-63 letters, digits, dots, hyphens and underscores, starting with a letter or digit."),
)


def hash_token(token: str) -> str:
    """Node tokens are 256-bit random strings, so one SHA-256 is as strong as a slow KDF here."""
    return hashlib.sha256(token.encode()).hexdigest()


DEFAULT_CLUSTER = "default"


class Cluster(models.Model):
    """A set of nodes under one scheduler (a Kubernetes cluster, a Slurm cluster or a plain
    group). Owner values (namespaces, accounts, users, jobs) mean something only inside their
    cluster: an attribution rule on one holds for samples of that cluster's nodes only."""

    class Kind(models.TextChoices):
        KUBERNETES = "kubernetes", _("Kubernetes")
        SLURM = "slurm", _("Slurm")
        PLAIN = "plain", _("plain group")

    name = models.CharField(_("name"), max_length=63, unique=True,
                            validators=[node_name_validator])
    kind = models.CharField(_("scheduler"), max_length=12, choices=Kind.choices,
                            default=Kind.PLAIN)
    description = models.TextField(_("description"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["kubernetes", "slurm", "plain"]),
                                   name="cluster_kind_known"),
        ]

    def __str__(self) -> str:
        return self.name


def default_cluster() -> int:
    """The cluster a node joins when none is named (every node belongs to one)."""
    return Cluster.objects.get_or_create(name=DEFAULT_CLUSTER)[0].pk


class NodeQuerySet(models.QuerySet):
    def by_token(self, token: str) -> "Node | None":
        """The node holding this token, or None (unknown or revoked)."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        digest = hash_token(token)
        node = self.filter(token_hash=digest).first()
        # The lookup is by hash, so timing reveals nothing about the secret; compare anyway, in
        # constant time, so a collation quirk in the database can never let a near-miss through.
        if node is None or not hmac.compare_digest(node.token_hash, digest):
            return None
        return node


class Node(models.Model):
    """A GPU server running the agent; authenticates with its own token."""

    name = models.CharField(
        _("name"), max_length=63, unique=True, validators=[node_name_validator]
    )
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, related_name="nodes", default=default_cluster,
        verbose_name=_("cluster"),
        help_text=_("Owner rules (namespace, account, user, job) match only within it."))
    max_devices = models.PositiveSmallIntegerField(
        _("max devices"), default=16,
        help_text=_("How many GPUs this node's token may report (MIG instances count as their "
                    "GPU); devices past it are refused and operators alerted."))
    default_tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.SET_NULL, null=True, blank=True,
        related_name="default_nodes", verbose_name=_("default tenant"),
        help_text=_("Usage no attribution rule claims goes to this tenant."),
    )
    # NULL, not "", so that any number of nodes without a token pass the unique index.
    token_hash = models.CharField(  # noqa: DJ001
        max_length=64, unique=True, null=True, editable=False
    )
    token_prefix = models.CharField(_("token"), max_length=16, blank=True, editable=False)
    token_issued_at = models.DateTimeField(_("token issued"), null=True, editable=False)
    last_seen_at = models.DateTimeField(_("last seen"), null=True, blank=True, editable=False)
    agent_version = models.CharField(_("agent version"), max_length=64, blank=True, editable=False)
    dropped_samples = models.PositiveBigIntegerField(
        _("samples dropped by the agent"), default=0, editable=False,
        help_text=_("Reported by the agent when its spool overflowed: usage that never arrived."),
    )
    # The agent reports a running total since it started; keeping the last one makes a resent
    # batch add nothing and an agent restart (total back near 0) start a new run.
    dropped_samples_reported = models.PositiveBigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")

    def __str__(self) -> str:
        return self.name

    @property
    def has_token(self) -> bool:
        return self.token_hash is not None

    def issue_token(self) -> str:
        """Replace any token with a new one; returns it in clear, the only time it exists so."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.token_hash = hash_token(token)
        self.token_prefix = token[: len(TOKEN_PREFIX) + 6]
        self.token_issued_at = timezone.now()
        self.save(update_fields=["token_hash", "token_prefix", "token_issued_at"])
        return token

    def revoke_token(self) -> None:
        self.token_hash = None
        self.token_prefix = ""
        self.token_issued_at = None
        self.save(update_fields=["token_hash", "token_prefix", "token_issued_at"])


def parent_of(uuid: str, index: int | None) -> str:
    """The physical GPU a device is part of: a MIG instance's GPU (by its index on the node),
    a time-sliced replica's GPU (`<uuid>::<n>`), else the device itself. A node's device limit
    counts these."""
    if uuid.startswith("MIG-") and index is not None:
        return f"index:{index}"
    return uuid.split("::", 1)[0]


def share_of(uuid: str, fraction: float | None) -> float:
    """How much of its physical GPU a device is, for capacity: a MIG instance or a replica its
    fraction, a whole GPU 1 (even when a sample holds only a fraction of it)."""
    if (uuid.startswith("MIG-") or "::" in uuid) and fraction:
        return min(1.0, fraction)
    return 1.0


class Gpu(models.Model):
    """A physical GPU, MIG instance or time-sliced replica (a device), registered the first
    time a sample names it. A device belongs to one node at a time (GpuTenure keeps which node
    reported it when)."""

    id = models.AutoField(primary_key=True)
    uuid = models.CharField(_("UUID"), max_length=96, unique=True)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="gpus")
    parent = models.CharField(
        _("physical GPU"), max_length=96, blank=True,
        help_text=_("The GPU a MIG instance or replica is part of; the device itself else."))
    share = models.FloatField(
        _("share of its GPU"), default=1.0,
        help_text=_("For capacity: a MIG instance's or replica's fraction, else 1."))
    index = models.PositiveSmallIntegerField(_("index"), null=True, blank=True)
    model = models.CharField(_("model"), max_length=128, blank=True)
    memory_total_mib = models.PositiveIntegerField(_("memory (MiB)"), null=True, blank=True)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    last_seen_at = models.DateTimeField(_("last seen"), null=True, blank=True)

    class Meta:
        ordering = ["node__name", "index", "uuid"]
        verbose_name = _("GPU")
        verbose_name_plural = _("GPUs")

    def __str__(self) -> str:
        return f"{self.node.name}/{self.index if self.index is not None else '?'} {self.uuid}"


class GpuTenure(models.Model):
    """Which node reported a device, from when until when (None: still). Kept for good."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="tenures")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="tenures")
    since = models.DateTimeField(_("since"))
    until = models.DateTimeField(_("until"), null=True, blank=True)

    class Meta:
        ordering = ["gpu", "since"]
        verbose_name = _("device tenure")
        verbose_name_plural = _("device tenures")
        constraints = [
            models.UniqueConstraint(fields=["gpu"], condition=Q(until__isnull=True),
                                    name="tenure_one_node_at_a_time"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu.uuid} on {self.node} from {self.since:%Y-%m-%d %H:%M}"


class DeviceRefusal(models.Model):
    """A device a node reported whose samples the meter refused: past the node's device limit,
    or still held by another node (it moves once that node has been silent about it for the
    move window). One row per node, device and reason, with when it was first and last seen;
    the alert job tells operators of the recent ones."""

    class Reason(models.TextChoices):
        DEVICE_LIMIT = "device_limit", _("past the node's device limit")
        OTHER_NODE = "other_node", _("still reported by another node")

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="refusals")
    gpu_uuid = models.CharField(_("device"), max_length=96)
    reason = models.CharField(_("reason"), max_length=12, choices=Reason.choices)
    holder = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+", verbose_name=_("held by"))
    first_at = models.DateTimeField(_("first refused"))
    last_at = models.DateTimeField(_("last refused"))
    samples = models.PositiveBigIntegerField(_("samples refused"), default=0)

    class Meta:
        ordering = ["-last_at"]
        verbose_name = _("refused device")
        verbose_name_plural = _("refused devices")
        constraints = [
            models.UniqueConstraint(fields=["node", "gpu_uuid", "reason"],
                                    name="refusal_once_per_node_device_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.gpu_uuid} ({self.get_reason_display()})"


OWNER_FIELDS = ("namespace", "account", "user", "job")


class AttributionRule(models.Model):
    """Claims usage for a tenant when a sample's owner (or node) has this value.

    Owner values hold within one cluster: a rule for namespace `team-a` in cluster `prod` never
    matches a sample from a node of another cluster. Node rules need no cluster (node names are
    unique). Rules are tried by priority (lower first), then by field in the order listed here.
    """

    class Field(models.TextChoices):
        NAMESPACE = "namespace", _("namespace")
        ACCOUNT = "account", _("account")
        USER = "user", _("user")
        JOB = "job", _("job")
        NODE = "node", _("node")

    tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.CASCADE, related_name="attribution_rules"
    )
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, null=True, blank=True, related_name="rules",
        verbose_name=_("cluster"),
        help_text=_("Where the owner value means this tenant; empty for a node rule."))
    field = models.CharField(_("matches"), max_length=10, choices=Field.choices)
    value = models.CharField(_("value"), max_length=253)
    priority = models.PositiveSmallIntegerField(
        _("priority"), default=100, help_text=_("Lower is tried first.")
    )

    class Meta:
        ordering = ["priority", "field", "value"]
        verbose_name = _("attribution rule")
        verbose_name_plural = _("attribution rules")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "field", "value"], condition=~Q(field="node"),
                name="attribution_value_claimed_once_in_cluster",
                violation_error_message=_("Another rule already claims this value in this "
                                          "cluster."),
            ),
            models.UniqueConstraint(
                fields=["field", "value"], condition=Q(field="node"),
                name="attribution_node_claimed_once",
                violation_error_message=_("Another rule already claims this node."),
            ),
            models.CheckConstraint(
                condition=(Q(field="node") & Q(cluster__isnull=True))
                | (~Q(field="node") & Q(cluster__isnull=False)),
                name="attribution_cluster_matches_field",
                violation_error_message=_("An owner rule names its cluster; a node rule names "
                                          "none."),
            ),
            models.CheckConstraint(
                condition=Q(field__in=["namespace", "account", "user", "job", "node"]),
                name="attribution_field_known",
            ),
            models.CheckConstraint(condition=~Q(value=""), name="attribution_value_not_empty"),
        ]

    def __str__(self) -> str:
        where = f"@{self.cluster}" if self.cluster_id else ""
        return f"{self.field}={self.value}{where} -> {self.tenant.slug}"

    def save(self, *args, **kwargs) -> None:
        self._in_a_cluster()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if self.field == self.Field.NODE and self.cluster_id is not None:
            raise ValidationError({"cluster": _("A node rule names no cluster: the node is "
                                                "already in one.")})
        self._in_a_cluster()

    def _in_a_cluster(self) -> None:
        """An owner rule that names no cluster holds in the default one."""
        if self.field in OWNER_FIELDS and self.cluster_id is None:
            self.cluster_id = default_cluster()


class UsageSample(models.Model):
    """One GPU over one interval, as an agent reported it. Idempotency key: (GPU, ts)."""

    # Every index costs COPY speed: the key (gpu_id, ts) and an index on ts are all reads need.
    pk = models.CompositePrimaryKey("gpu_id", "ts")
    gpu = models.ForeignKey(
        Gpu, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False
    )
    ts = models.DateTimeField()
    node = models.ForeignKey(
        Node, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False
    )
    tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.DO_NOTHING, db_constraint=False, null=True,
        db_index=False,
    )
    interval_s = models.PositiveSmallIntegerField()
    allocated = models.BooleanField()
    fraction = models.FloatField(default=1.0)
    util_pct = models.FloatField(null=True)
    mem_used_mib = models.PositiveIntegerField(null=True)
    power_w = models.FloatField(null=True)
    temp_c = models.SmallIntegerField(null=True)
    owner = models.JSONField(null=True)

    class Meta:
        verbose_name = _("usage sample")
        verbose_name_plural = _("usage samples")
        indexes = [models.Index(fields=["ts"], name="sample_ts")]
        constraints = [
            models.CheckConstraint(
                condition=Q(interval_s__gte=1) & Q(interval_s__lte=3600),
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
    allocated_gpu_s = models.FloatField(default=0.0)
    busy_gpu_s = models.FloatField(default=0.0)
    sample_count = models.PositiveIntegerField(default=0)
    peak_gpus = models.FloatField(
        default=0.0, help_text=_("Most GPUs allocated at one instant in the hour.")
    )
    reported_s = models.FloatField(
        default=0.0, db_default=0.0,
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
    """A tenant's usage in one hour; tenant None is the unattributed usage."""

    tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.PROTECT, null=True, db_index=False
    )

    class Meta:
        verbose_name = _("tenant hour")
        verbose_name_plural = _("tenant hours")
        constraints = [
            models.UniqueConstraint(
                "hour", Coalesce("tenant", NO_TENANT), name="tenant_hour_once"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "hour"], name="tenant_hour_by_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant or _('unattributed')} {self.hour:%Y-%m-%d %H:00}"


class GpuHour(HourlyRollup):
    """One GPU's usage in one hour, per tenant that held it."""

    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT)
    tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.PROTECT, null=True, db_index=False
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


class TenantInstant(models.Model):
    """GPUs a tenant held at one sample timestamp: the running sum behind an hour's peak.

    Kept as its own row so that concurrent batches add to it under a row lock and each sees the
    full total (rollup peaks stay exact); raw-retention applies to it like to samples.
    """

    tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.DO_NOTHING, db_constraint=False, null=True,
        db_index=False,
    )
    ts = models.DateTimeField()
    gpus = models.FloatField(default=0.0)

    class Meta:
        verbose_name = _("tenant instant")
        verbose_name_plural = _("tenant instants")
        constraints = [
            models.UniqueConstraint(
                "ts", Coalesce("tenant", NO_TENANT), name="tenant_instant_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.ts:%Y-%m-%d %H:%M:%S} {self.gpus}"


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


class Reattribution(models.Model):
    """An operator's move of a time range's usage to a tenant: a node's, an owner value's, or
    the usage no rule claimed. Kept for good, with what it moved from whom; the ledger turns
    the change into corrections where it touches closed periods."""

    class Scope(models.TextChoices):
        NODE = "node", _("a node's usage")
        NAMESPACE = "namespace", _("a namespace's usage")
        ACCOUNT = "account", _("an account's usage")
        USER = "user", _("a user's usage")
        JOB = "job", _("a job's usage")
        UNATTRIBUTED = "unattributed", _("unattributed usage")

    scope = models.CharField(_("what"), max_length=12, choices=Scope.choices)
    value = models.CharField(
        _("value"), max_length=253, blank=True,
        help_text=_("The node's name or the owner value; empty for unattributed usage."))
    start = models.DateTimeField(_("from"))
    end = models.DateTimeField(_("until"))
    tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.PROTECT, related_name="+", verbose_name=_("to tenant"))
    gpu_hours = models.DecimalField(_("allocated GPU-hours moved"), max_digits=16,
                                    decimal_places=6)
    samples = models.PositiveIntegerField(_("samples moved"))
    moved_from = models.JSONField(
        _("moved from"), default=dict,
        help_text=_('Allocated GPU-hours by former tenant id ("" for unattributed).'))
    reason = models.TextField(_("reason"))
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+", verbose_name=_("by"))
    created_at = models.DateTimeField(_("done"), default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("re-attribution")
        verbose_name_plural = _("re-attributions")
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")),
                                   name="reattribution_forward"),
            models.CheckConstraint(
                condition=Q(scope__in=["node", "namespace", "account", "user", "job",
                                       "unattributed"]),
                name="reattribution_scope_known"),
            models.CheckConstraint(
                condition=Q(scope="unattributed", value="") | (~Q(scope="unattributed")
                                                               & ~Q(value="")),
                name="reattribution_value_matches_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.get_scope_display()} {self.value} -> {self.tenant_id}"
