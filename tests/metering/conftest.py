"""A node of the vision tenant's cluster and its agent token, for the ingestion tests."""

import pytest

from metering.models import AttributionRule, Node


@pytest.fixture
def node(tenant):
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision")
    return Node.objects.create(name="gpu-node-01")


@pytest.fixture
def token(node) -> str:
    return node.issue_token()
