"""Kubernetes as gpuloans enforces contracts on it (loans.schedulers.protocol.Enforcer): each
tenant's ResourceQuota and Kueue ClusterQueue (manifests), which the cluster's operators apply
with `kubectl apply` (manage.py quota_manifests prints them); gpuloans runs nothing there, so
every change is made by hand."""

from datetime import datetime

from loans.models import Tenant
from loans.schedulers.kubernetes import manifests
from loans.schedulers.protocol import Change, EnforcementError


class Kubernetes:
    kind = "kubernetes"
    errors = (EnforcementError,)

    def apply(self, cluster_id: int, cluster_name: str, *, at: datetime,
              dry_run: bool) -> list[Change]:
        changes = []
        for tenant in Tenant.objects.order_by("slug"):
            contract = manifests.active_contract(tenant, at)
            if contract is None:
                continue
            quota, queue = manifests.documents(tenant, contract, at)
            gpus = quota["spec"]["hard"][f"requests.{manifests.GPU}"]
            held = " (held)" if queue["spec"].get("stopPolicy") == "Hold" else ""
            changes.append(Change(
                account=quota["metadata"]["namespace"], tenant_id=tenant.pk,
                what=f"ResourceQuota {manifests.GPU} {gpus}; ClusterQueue {tenant.slug}{held}",
                command=()))
        return changes
