"""Attribution rules (which tenant a sample's owner or node means) and re-attributions
(usage operators moved between tenants)."""


from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from metering.models.nodes import Cluster, default_cluster

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
        "loans.Tenant", verbose_name=_("tenant"), on_delete=models.CASCADE,
        related_name="attribution_rules",
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
