"""Each tenant's GPU quota as the manifests a cluster applies: a Kubernetes ResourceQuota for
the tenant's namespace and a Kueue ClusterQueue, both holding the one quota every scheduler
carries (bursts.effective_quota: the base plus the bursts granted now, never past the cap; the
ClusterQueue borrows nothing from its cohort, since room above the base is granted as a burst),
the ClusterQueue held while the contract's overage policy holds it
(loans.services.ledger.overage)."""

from datetime import datetime

import yaml
from django.utils.text import slugify

from loans.maths import admission
from loans.models import Contract, Tenant, policy_of
from loans.services import bursts
from loans.services.ledger import overage
from metering.usage import fleet

COHORT = "gpuloans"
GPU = "nvidia.com/gpu"
MANAGED = {"app.kubernetes.io/managed-by": "gpuloans"}


def namespace_of(tenant: Tenant) -> str:
    """The namespace its attribution rules name first (the one attribution tries first: lower
    priority first), else the tenant's slug."""
    return fleet.first_namespace(tenant.pk) or tenant.slug


def documents(tenant: Tenant, contract: Contract, at: datetime) -> list[dict]:
    """The ResourceQuota and the ClusterQueue; the ClusterQueue on `stopPolicy: Hold` while the
    contract's period is held (on hold past its commitment, or past its overage budget):
    Kueue admits nothing new from it and lets what runs finish. The next period, or a policy
    that allows overage, lifts it."""
    effective, _ = bursts.effective_quota(contract, at)
    kind, budget = policy_of(contract)
    held = overage.admission_state(contract, kind, budget, at) == admission.HELD
    namespace = namespace_of(tenant)
    flavor = slugify(contract.gpu_model) or "default-flavor"
    labels = {**MANAGED, "gpuloans/tenant": tenant.slug}
    return [
        {
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpuloans-gpu", "namespace": namespace, "labels": labels},
            "spec": {"hard": {f"requests.{GPU}": str(effective), f"limits.{GPU}": str(effective)}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": tenant.slug, "labels": labels},
            "spec": {
                "cohort": COHORT,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [{
                    "coveredResources": [GPU],
                    "flavors": [{"name": flavor, "resources": [{
                        "name": GPU, "nominalQuota": effective, "borrowingLimit": 0}]}],
                }],
                **({"stopPolicy": "Hold"} if held else {}),
            },
        },
    ]


def active_contract(tenant: Tenant, at: datetime) -> Contract | None:
    for contract in tenant.contracts.filter(status=Contract.Status.ACTIVE).select_related("plan"):
        if contract.period_at(at) is not None:
            return contract
    return None


def tenant_manifests(tenant: Tenant, at: datetime) -> str | None:
    contract = active_contract(tenant, at)
    if contract is None:
        return None
    return yaml.safe_dump_all(documents(tenant, contract, at), sort_keys=False)


def all_manifests(at: datetime, tenants=None) -> str:
    docs = []
    for tenant in tenants if tenants is not None else Tenant.objects.all():
        contract = active_contract(tenant, at)
        if contract is not None:
            docs += documents(tenant, contract, at)
    return yaml.safe_dump_all(docs, sort_keys=False)
