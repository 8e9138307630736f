"""Clusters, nodes and their agent tokens."""

import hmac
import secrets

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.bearer import hash_token  # noqa: F401 - metering.models.hash_token, as before

TOKEN_PREFIX = "gpln_"

node_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$",
    _("Use 1-63 letters, digits, dots, hyphens and underscores, starting with a letter or digit."),
)


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
    # Kubernetes: where the floor's lister reads Workloads or pods (a read-only service
    # account, deploy/kubernetes/gpuloans-reader.yaml). The credential itself is never stored
    # here: only where it is read from.
    api_url = models.URLField(_("API server"), blank=True,
                              help_text=_("Kubernetes: the API server's address, "
                                          "https://host:6443. Empty: the cluster's waits are "
                                          "not read."))
    api_token_file = models.CharField(
        _("token file"), max_length=500, blank=True,
        help_text=_("Kubernetes: a file holding the service account's token (e.g. a mounted "
                    "secret)."))
    api_token_env = models.CharField(
        _("token variable"), max_length=100, blank=True,
        validators=[RegexValidator(r"^[A-Z_][A-Z0-9_]*$", _("An environment variable's name: "
                                                           "capitals, digits, underscores."))],
        help_text=_("Kubernetes: the environment variable holding the token, where no file "
                    "is named."))
    api_ca_file = models.CharField(
        _("CA file"), max_length=500, blank=True,
        help_text=_("Kubernetes: the API server's certificate authority; empty: the system's."))

    class Queue(models.TextChoices):
        KUEUE = "kueue", _("Kueue workloads")
        PODS = "pods", _("pods")

    queue = models.CharField(_("waiting work read from"), max_length=8, choices=Queue.choices,
                             default=Queue.KUEUE, help_text=_(
                                 "Kubernetes: Kueue's Workloads, or pods where the cluster "
                                 "queues with a plain ResourceQuota."))

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["kubernetes", "slurm", "plain"]),
                                   name="cluster_kind_known"),
            models.CheckConstraint(condition=~Q(api_token_file="") | ~Q(api_token_env="")
                                   | Q(api_url=""), name="cluster_api_has_a_credential",
                                   violation_error_message=_(
                                       "Say where the API's token is read from: a file or "
                                       "an environment variable.")),
            models.CheckConstraint(condition=Q(queue__in=["kueue", "pods"]),
                                   name="cluster_queue_known"),
        ]

    def __str__(self) -> str:
        return self.name


def default_cluster() -> int:
    """The cluster a node joins when none is named (every node belongs to one). Only its key
    is read: migration metering 0007 calls this with the columns of its own time."""
    pk = Cluster.objects.filter(name=DEFAULT_CLUSTER).values_list("pk", flat=True).first()
    return pk if pk is not None else Cluster.objects.create(name=DEFAULT_CLUSTER).pk


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
        _("physical GPUs"), default=8,
        help_text=_("The node's physical GPU count (8 on an HGX or DGX server): its token may "
                    "report at most this many GPUs in any hour, MIG instances and replicas "
                    "counting as their GPU; devices past it are refused and operators "
                    "alerted."))
    default_tenant = models.ForeignKey(
        "loans.Tenant", on_delete=models.SET_NULL, null=True, blank=True,
        related_name="default_nodes", verbose_name=_("default tenant"),
        help_text=_("Usage no attribution rule claims goes to this tenant."),
    )
    # NULL, not "", so that any number of nodes without a token pass the unique index.
    token_hash = models.CharField(  # noqa: DJ001
        _("token hash"), max_length=64, unique=True, null=True, editable=False
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
    dropped_samples_reported = models.PositiveBigIntegerField(
        _("dropped samples reported"), default=0, editable=False,
    )
    # Intake accepts the node's samples only from this time on (metering.intake.ingest.oldest):
    # a new token cannot fill the past. Code that writes history directly (the demo) sets it
    # back; an operator cannot.
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)

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
