"""Hostile and random input at POST /api/v1/samples: always a precise 4xx or a 202 whose
counts match what was stored; never a server error."""

import json
from datetime import timedelta

from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering.models import Node, UsageSample
from tests.helpers import assert_rollups_equal_a_recount

URL = "/api/v1/samples"
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


@st.composite
def sample(draw):
    """A valid sample, or (half the time) one with a field or two bent or replaced."""
    now = timezone.now()
    good = {
        "gpu_uuid": draw(st.sampled_from(["GPU-a", "GPU-b", "MIG-c"])),
        "ts": (now - timedelta(minutes=draw(st.integers(0, 60 * 24 * 30)))).isoformat(),
        "interval_s": draw(st.sampled_from([60, 30, 3600])),
        "allocated": draw(st.booleans()),
        "fraction": draw(st.sampled_from([1.0, 0.5, 1 / 7])),
        "util_pct": draw(st.floats(0, 100, allow_nan=False)),
        "owner": draw(st.sampled_from([{"namespace": "vision"}, None, {"job": 7}])),
    }
    if draw(st.booleans()):
        bent = {"gpu_uuid": ["", " x", "é" * 97], "ts": ["2026-13-01T00:00:00Z", "now"],
                "interval_s": [0, 3601, "60", True], "allocated": [1, None],
                "fraction": [0, 2, None], "util_pct": [-1, 101, "x"],
                "owner": ["x", {"user": [1]}]}
        for key in draw(st.lists(st.sampled_from(sorted(good)), min_size=1, max_size=2)):
            good[key] = draw(st.one_of(st.sampled_from(bent[key]), values))
    return good


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.one_of(sample(), values), max_size=12))
def test_random_batches_never_cause_a_server_error(db, batch):
    node, _ = Node.objects.get_or_create(name="gpu-node-01")
    token = node.issue_token()
    before = UsageSample.objects.count()
    response = Client().post(URL, json.dumps({"node": "gpu-node-01", "samples": batch}),
                             content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202, response.content
    answer = response.json()
    assert UsageSample.objects.count() - before == answer["accepted"]
    assert answer["accepted"] + answer["duplicates"] + len(answer["rejected"]) == len(batch)
    assert all(isinstance(r["index"], int) and r["error"] for r in answer["rejected"])
    assert_rollups_equal_a_recount()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=200), values.map(lambda v: json.dumps(v).encode())))
def test_random_bodies_get_a_4xx_or_a_202_never_a_500(db, body):
    node, _ = Node.objects.get_or_create(name="gpu-node-01")
    token = node.issue_token()
    response = Client().post(URL, body, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code in (202, 400, 403), response.content
    assert "error" in response.json() or "accepted" in response.json()
