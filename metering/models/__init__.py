"""Nodes, devices, raw usage samples, hourly rollups and attribution rules.

metering knows a tenant only as a foreign key.
"""

from metering.models.attribution import OWNER_FIELDS, AttributionRule, Reattribution
from metering.models.devices import (
    TENURE_START,
    DeviceRefusal,
    Gpu,
    GpuTenure,
    hand_over,
    index_key,
    is_part,
    physical_key,
    share_of,
)
from metering.models.nodes import (
    DEFAULT_CLUSTER,
    TOKEN_PREFIX,
    Cluster,
    Node,
    NodeQuerySet,
    default_cluster,
    hash_token,
    node_name_validator,
)
from metering.models.samples import (
    NO_TENANT,
    OWNER_KEYS,
    GpuHour,
    HourlyRollup,
    Owner,
    RawHorizon,
    RealField,
    TenantHour,
    UsageSample,
)
from metering.models.slurm import SlurmHour, SlurmJob
from metering.models.waits import JobWait

__all__ = [
    "DEFAULT_CLUSTER", "NO_TENANT", "OWNER_FIELDS", "OWNER_KEYS", "TENURE_START", "TOKEN_PREFIX",
    "AttributionRule", "Cluster", "DeviceRefusal", "Gpu", "GpuHour", "GpuTenure", "HourlyRollup",
    "JobWait", "Node", "NodeQuerySet", "Owner", "RawHorizon", "RealField", "Reattribution",
    "SlurmHour", "SlurmJob", "TenantHour", "UsageSample", "default_cluster", "hash_token",
    "node_name_validator", "hand_over", "index_key", "is_part", "physical_key", "share_of",
    "tenant_model",
]


def tenant_model():
    """The tenant, as metering knows it: the target of its foreign keys ("loans.Tenant").
    Metering imports nothing of loans; it asks its own field where the key points."""
    return Node._meta.get_field("default_tenant").related_model
