"""The quota manifests (quota_manifests) are what Kubernetes and Kueue accept: each document
validated against the published ResourceQuota and ClusterQueue schemas (tests/loans/schemas),
unknown fields refused as `kubectl apply --validate=strict` refuses them, and the
ClusterQueue CRD's own CEL rules checked."""

import copy
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from loans.models import BurstRequest
from metering.models import AttributionRule, Cluster

SCHEMAS = Path(__file__).with_name("schemas")


def validator(name: str) -> Draft202012Validator:
    registry = Registry().with_resource("objectmeta.yaml", DRAFT202012.create_resource(
        yaml.safe_load((SCHEMAS / "objectmeta.yaml").read_text())))
    return Draft202012Validator(yaml.safe_load((SCHEMAS / name).read_text()), registry=registry)


SCHEMA_OF = {"ResourceQuota": "resourcequota-v1.yaml",
             "ClusterQueue": "kueue-clusterqueue-v1beta1.yaml"}


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
    assert (resource["nominalQuota"], resource["borrowingLimit"]) == (8, 8)


@pytest.mark.parametrize("break_it", [
    lambda q, c: q["spec"]["hard"].update({"limits.nvidia.com/gpu": "eleven"}),
    lambda q, c: q["metadata"].update({"namespace": "Vision_Train"}),
    lambda q, c: q["spec"].update({"hardd": {}}),
    lambda q, c: c["spec"]["resourceGroups"][0]["flavors"][0].update({"name": "H100 80GB"}),
    lambda q, c: c["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop(
        "nominalQuota"),
    lambda q, c: c["spec"].pop("cohort"),  # a borrowing limit without a cohort
    lambda q, c: c["spec"]["resourceGroups"][0]["coveredResources"].append("cpu"),
])
def test_the_validation_refuses_what_kubernetes_or_kueue_would(documents, break_it):
    quota, queue = copy.deepcopy(documents)
    break_it(quota, queue)
    with pytest.raises((ValidationError, AssertionError)):
        check(quota)
        check(queue)
