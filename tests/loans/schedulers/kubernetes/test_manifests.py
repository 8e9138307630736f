"""The quota manifests (quota_manifests) are what Kubernetes and Kueue accept: each document
validated against the published ResourceQuota and ClusterQueue schemas (schemas/ beside this
file), unknown fields refused as `kubectl apply --validate=strict` refuses them, and the
ClusterQueue CRD's own CEL rules checked."""

import copy
from collections import namedtuple
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from loans import schedulers
from loans.models import BurstRequest, OveragePolicy
from loans.schedulers.kubernetes import manifests
from loans.schedulers.protocol import Change
from loans.services.ledger import read as ledgers
from metering.models import AttributionRule, Cluster
from tests.kube import strict

SCHEMAS = Path(__file__).with_name("schemas")
Metered = namedtuple("Metered", "allocated_gpu_hours busy_gpu_hours", defaults=[Decimal(0)])


CRD = "kueue.x-k8s.io_clusterqueues.yaml"


def crd_schema(version: str) -> dict:
    """The `version` schema of Kueue's published ClusterQueue CRD, its metadata the object
    metadata Kubernetes checks (a CRD leaves it to the API server)."""
    crd = yaml.safe_load((SCHEMAS / CRD).read_text())
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"$ref": "objectmeta.yaml"}
    schema["required"] = ["apiVersion", "kind", "metadata", "spec"]
    schema["properties"]["apiVersion"] = {"const": f"kueue.x-k8s.io/{version}"}
    schema["properties"]["kind"] = {"const": "ClusterQueue"}
    return schema


def validator(name: str) -> Draft202012Validator:
    registry = Registry().with_resource("objectmeta.yaml", DRAFT202012.create_resource(
        yaml.safe_load((SCHEMAS / "objectmeta.yaml").read_text())))
    schema = crd_schema("v1beta1") if name == CRD else yaml.safe_load(
        (SCHEMAS / name).read_text())
    return Draft202012Validator(schema, registry=registry)


SCHEMA_OF = {"ResourceQuota": "resourcequota-v1.yaml", "ClusterQueue": CRD}


def check(document: dict) -> None:
    validator(SCHEMA_OF[document["kind"]]).validate(document)
    if document["kind"] == "ClusterQueue":  # the CRD's x-kubernetes-validations
        spec = document["spec"]
        for group in spec.get("resourceGroups", []):
            assert all(len(f["resources"]) == len(group["coveredResources"])
                       for f in group["flavors"]), "flavors must have as many resources"
            if "cohort" not in spec:
                assert all("borrowingLimit" not in r for f in group["flavors"]
                           for r in f["resources"]), "borrowingLimit needs a cohort"


@pytest.fixture
def documents(contract, tenant, lead, capsys):
    cluster = Cluster.objects.create(name="k8s", kind=Cluster.Kind.KUBERNETES)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="vision-train",
                                   field=AttributionRule.Field.NAMESPACE)
    now = timezone.now()
    BurstRequest.objects.create(contract=contract, gpus=3, starts_at=now - timedelta(hours=1),
                                ends_at=now + timedelta(hours=1), reason="deadline",
                                state=BurstRequest.State.GRANTED, requested_by=lead,
                                created_at=now - timedelta(hours=2))
    call_command("quota_manifests")
    return list(yaml.safe_load_all(capsys.readouterr().out))


def test_every_manifest_is_valid_for_kubernetes_and_kueue(documents):
    assert [d["kind"] for d in documents] == ["ResourceQuota", "ClusterQueue"]
    for document in documents:
        check(document)
    quota, queue = documents
    assert quota["metadata"]["namespace"] == "vision-train"
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "11"  # base 8 + the burst
    [resource] = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert (resource["nominalQuota"], resource["borrowingLimit"]) == (11, 0)  # borrows nothing


@pytest.mark.parametrize("break_it", [
    lambda q, c: q["spec"]["hard"].update({"limits.nvidia.com/gpu": "eleven"}),
    lambda q, c: q["metadata"].update({"namespace": "Vision_Train"}),
    lambda q, c: q["spec"].update({"hardd": {}}),
    lambda q, c: c["spec"]["resourceGroups"][0]["flavors"][0].update({"name": "H100 80GB"}),
    lambda q, c: c["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop(
        "nominalQuota"),
    lambda q, c: c["spec"].pop("cohort"),  # a borrowing limit without a cohort
    lambda q, c: c["spec"]["resourceGroups"][0]["coveredResources"].append("cpu"),
    lambda q, c: c["spec"].update({"stopPolicy": "Stop"}),
    lambda q, c: c["spec"].update({"cohortName": "gpuloans"}),  # v1beta2's name, not v1beta1's
])
def test_the_validation_refuses_what_kubernetes_or_kueue_would(documents, break_it):
    quota, queue = copy.deepcopy(documents)
    break_it(quota, queue)
    with pytest.raises((ValidationError, AssertionError)):
        check(quota)
        check(queue)


def held(contract, kind: str, budget=None) -> None:
    OveragePolicy.objects.create(contract=contract, kind=kind, budget=budget,
                                 set_at=timezone.now())


@pytest.mark.parametrize(("kind", "budget", "used", "stopped"), [
    ("hold", None, "999", False),  # commitment left: open
    ("hold", None, "1000", True),  # spent, on hold: Kueue admits nothing new
    ("allow", None, "5000", False),  # overage allowed
    ("budget", Decimal("100"), "1005", False),  # 5 GPU-h of overage, under the budget
    ("budget", Decimal("100"), "1100", True),  # 100 GPU-h of overage: past the budget
])
def test_a_held_contract_stops_its_cluster_queue_and_each_state_is_valid(
        contract, tenant, kind, budget, used, stopped, monkeypatch):
    held(contract, kind, budget)
    period = contract.period_at(timezone.now())
    entry = ledgers.live_entry(contract, period, timezone.now(), Metered(Decimal(used)))
    monkeypatch.setattr(ledgers, "period_entry", lambda *args: entry)
    [quota, queue] = manifests.documents(tenant, contract, timezone.now())
    check(quota)
    check(queue)
    assert queue["spec"].get("stopPolicy") == ("Hold" if stopped else None)


@pytest.mark.parametrize("kind, used, said", [
    ("hold", "1000", " (held)"), ("allow", "5000", ""),
])
def test_the_kubernetes_enforcer_says_each_tenants_manifests_as_changes_made_by_hand(
        contract, tenant, other_tenant, kind, used, said, monkeypatch):
    """loans.schedulers' Kubernetes enforcer: one change a tenant with a contract running (the
    other tenant has none), its namespace, quota and hold as the manifests carry them, and no
    command (the cluster's operators apply the manifests)."""
    held(contract, kind)
    period = contract.period_at(timezone.now())
    entry = ledgers.live_entry(contract, period, timezone.now(), Metered(Decimal(used)))
    monkeypatch.setattr(ledgers, "period_entry", lambda *args: entry)
    [quota, _queue] = manifests.documents(tenant, contract, timezone.now())
    enforcer = schedulers.for_kind("kubernetes")
    changes = enforcer.apply(0, "k8s", at=timezone.now(), dry_run=False)
    gpus = quota["spec"]["hard"][f"requests.{manifests.GPU}"]
    assert changes == [Change(
        account=quota["metadata"]["namespace"], tenant_id=tenant.pk, command=(),
        what=f"ResourceQuota {manifests.GPU} {gpus}; ClusterQueue {tenant.slug}{said}")]
    assert schedulers.for_kind("plain") is None
