"""Devices: a physical GPU, MIG instance or time-sliced replica; which node reported it
when (tenures); devices a node was refused."""

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from metering.models.nodes import Node


def is_part(uuid: str) -> bool:
    """A MIG instance (`MIG-...`, or `<uuid>/<n>` as the agent names dcgm-exporter's) or a
    time-sliced replica (`<uuid>::<n>`, the device plugins' published naming): a part of a
    physical GPU, not a GPU of its own."""
    return uuid.startswith("MIG-") or "::" in uuid or "/" in uuid


def physical_key(uuid: str, index: int | None, parent: str | None, node_name: str) -> str:
    """The uuid of the physical GPU a device is part of: the parent the agent names, else a
    replica's id before `::`, else (a MIG instance) the node's GPU at its index, named
    `index:<n>@<node>` until that GPU reports under a uuid of its own; a whole GPU is its own."""
    if parent and parent != uuid:
        return parent
    if "::" in uuid:
        return uuid.split("::", 1)[0]
    if "/" in uuid:
        return uuid.split("/", 1)[0]
    if uuid.startswith("MIG-") and index is not None:
        return index_key(index, node_name)
    return uuid


def index_key(index: int, node_name: str) -> str:
    return f"index:{index}@{node_name}"


def share_of(uuid: str, fraction: float | None) -> float:
    """How much of its physical GPU a device is, for capacity: a MIG instance or a replica its
    fraction, a whole GPU 1 (even when a sample holds only a fraction of it)."""
    if is_part(uuid) and fraction:
        return min(1.0, fraction)
    return 1.0


class Gpu(models.Model):
    """A physical GPU, MIG instance or time-sliced replica (a device), registered the first
    time a sample names it. A device belongs to one node at a time (GpuTenure keeps which node
    reported it when)."""

    id = models.AutoField(primary_key=True)
    uuid = models.CharField(_("UUID"), max_length=96, unique=True)
    node = models.ForeignKey(
        Node, verbose_name=_("node"), on_delete=models.PROTECT, related_name="gpus",
    )
    # A MIG instance's or replica's physical GPU (a row of its own, which may never report
    # itself); NULL for a whole GPU, which is its own. The meter counts a physical GPU once:
    # the fractions of its devices' samples sum to at most 1 at every instant.
    physical = models.ForeignKey(
        "self", verbose_name=_("physical GPU"), on_delete=models.PROTECT, null=True,
        blank=True, related_name="parts",
        help_text=_("The GPU a MIG instance or replica is part of; empty for a whole GPU."))
    # On a physical GPU: whether devices other than itself are parts of it (the meter then
    # checks the fractions of the whole family, not only each device's own samples).
    shared = models.BooleanField(_("has parts"), default=False, editable=False)
    share = models.FloatField(
        _("share of its GPU"), default=1.0,
        help_text=_("For capacity: a MIG instance's or replica's fraction, else 1."))
    index = models.PositiveSmallIntegerField(_("index"), null=True, blank=True)
    model = models.CharField(_("model"), max_length=128, blank=True)
    memory_total_mib = models.PositiveIntegerField(_("memory (MiB)"), null=True, blank=True)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    last_seen_at = models.DateTimeField(_("last seen"), null=True, blank=True)
    # The span the device's stored samples cover, first start to last end: a batch wholly
    # before or after it cannot overlap a stored sample (the cheap check on the hot path;
    # anything else is checked sample by sample). Kept by the ingestion path.
    covered_from = models.DateTimeField(_("covered from"), null=True, blank=True, editable=False)
    covered_until = models.DateTimeField(_("covered until"), null=True, blank=True, editable=False)

    class Meta:
        ordering = ["node__name", "index", "uuid"]
        verbose_name = _("GPU")
        # The admin's menu names the model ("GPU"), not a count of them ("GPU 数").
        verbose_name_plural = pgettext_lazy("model", "GPUs")

    def __str__(self) -> str:
        return f"{self.node.name}/{self.index if self.index is not None else '?'} {self.uuid}"

    def save(self, *args, **kwargs) -> None:
        """A device saved for the first time is its node's from when it was first seen."""
        adding = self._state.adding
        super().save(*args, **kwargs)
        if adding:
            GpuTenure.objects.create(gpu=self, node_id=self.node_id, since=TENURE_START)


# A device's first tenure covers every sample before it moves (late ones included).
TENURE_START = datetime(2000, 1, 1, tzinfo=UTC)


class GpuTenure(models.Model):
    """Which node reported a device's samples, by sample time: from `since` until `until`
    (None: still). A move starts a new tenure where the old node's last stored sample of the
    device ends. Kept for good."""

    gpu = models.ForeignKey(
        Gpu, verbose_name=_("GPU"), on_delete=models.CASCADE, related_name="tenures",
    )
    node = models.ForeignKey(
        Node, verbose_name=_("node"), on_delete=models.PROTECT, related_name="tenures",
    )
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


def hand_over(physical: int, node: Node, boundary: Callable[[datetime | None], datetime],
              seen_at: datetime | None = None) -> int:
    """Make every device of the physical GPU (it and its MIG instances or replicas) that
    another node holds `node`'s from `boundary(covered_until)` on: the old tenure ends there
    and a new one begins, so the node that reported it keeps its hours. The rows are locked in
    id order, as a batch's statement locks its devices. Returns how many devices moved."""
    moved = 0
    with transaction.atomic():
        for gpu_id, covered in Gpu.objects.select_for_update().filter(
                Q(pk=physical) | Q(physical_id=physical)).exclude(node=node).order_by(
                "pk").values_list("pk", "covered_until"):
            since = boundary(covered)
            GpuTenure.objects.filter(gpu_id=gpu_id, until__isnull=True).update(until=since)
            GpuTenure.objects.create(gpu_id=gpu_id, node=node, since=since)
            seen = {} if seen_at is None else {"last_seen_at": seen_at}
            Gpu.objects.filter(pk=gpu_id).update(node=node, **seen)
            moved += 1
    return moved


class DeviceRefusal(models.Model):
    """Devices a node reported whose samples the meter refused: past the node's device limit,
    still held by another node (a device moves once that node has been silent about it for the
    move window, within one cluster), or of another cluster (an operator moves those). One row
    per node and reason, however many devices (a batch of thousands of made-up devices costs
    one write), with when it was first and last seen, the last batch's device count and one
    of them; the alert job tells operators of the recent ones."""

    class Reason(models.TextChoices):
        DEVICE_LIMIT = "device_limit", _("past the node's device limit")
        OTHER_NODE = "other_node", _("still reported by another node")
        OTHER_CLUSTER = "other_cluster", _("held by a node of another cluster")
        PARENT = "parent", _("its parent GPU is not this node's")
        PARENT_CLAIM = "parent_claim", _("named as a parent by another node")

    node = models.ForeignKey(
        Node, verbose_name=_("node"), on_delete=models.CASCADE, related_name="refusals",
    )
    gpu_uuid = models.CharField(_("device"), max_length=96,
                                help_text=_("One of the devices refused in the last batch."))
    devices = models.PositiveIntegerField(_("devices refused"), default=1,
                                          help_text=_("In the last batch refused."))
    reason = models.CharField(_("reason"), max_length=13, choices=Reason.choices)
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
            models.UniqueConstraint(fields=["node", "reason"],
                                    name="refusal_once_per_node_and_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.gpu_uuid} ({self.get_reason_display()})"
