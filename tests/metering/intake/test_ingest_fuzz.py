"""Hostile and random input at POST /api/v1/samples: always a precise 4xx or a 202 whose
counts match what was stored; never a server error. And the fast path of metering.intake.wire never
accepts what the per-sample path of metering.intake.protocol would refuse."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering.intake import protocol, wire
from metering.intake.columns import FIELDS, Columns
from metering.models import Node, UsageSample
from tests.helpers import assert_rollups_equal_a_recount
from tests.tiers import examples

URL = "/api/v1/samples"
# Text a database or an encoder may choke on: control characters, NUL, lone surrogates.
hostile_text = st.one_of(
    st.text(max_size=30),
    st.text(st.characters(categories=["Cs", "Cc", "Cf", "Zs", "Lo", "Nd"]), max_size=8),
    st.sampled_from(["\x00", "\ud800", "a\udfffb", "\u202e", " ", "\t"]),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), hostile_text,
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
                "owner": ["x", {"user": [1]}, {"pod": "\x00"}, {"job": 2**64}]}
        for key in draw(st.lists(st.sampled_from(sorted(good)), min_size=1, max_size=2)):
            good[key] = draw(st.one_of(st.sampled_from(bent[key]), values))
    return good


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow,
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


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=200), values.map(lambda v: json.dumps(v).encode())))
def test_random_bodies_get_a_4xx_or_a_202_never_a_500(db, body):
    node, _ = Node.objects.get_or_create(name="gpu-node-01")
    token = node.issue_token()
    response = Client().post(URL, body, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code in (202, 400, 403), response.content
    assert "error" in response.json() or "accepted" in response.json()


# JSON that Python's encoder will not write: literals and sizes only a hostile client sends.
RAW_BODIES = [
    b'{"node": "gpu-node-01", "samples": [{"util_pct": Infinity}]}',
    b'{"node": "gpu-node-01", "samples": [{"util_pct": -Infinity}]}',
    b'{"node": "gpu-node-01", "samples": [{"fraction": 1e999}]}',
    b'{"node": "gpu-node-01", "samples": [{"temp_c": ' + b"9" * 5000 + b"}]}",
    b'{"node": "gpu-node-01", "samples": [' + b'{"a": [' * 5000 + b"]}" * 5000 + b"]}",
    b'{"node": "gpu-node-01", "samples": [{"model": "\\ud800\\udc00\\ud800"}]}',
    b'{"node": "gpu-node-01\\u0000", "samples": []}',
    b'{"node": "gpu-node-01", "samples": [], "dropped_samples": 1e400}',
    b"\xff\xfe{}",
    b"",
]


@pytest.mark.parametrize("body", RAW_BODIES, ids=range(len(RAW_BODIES)))
def test_hostile_literals_get_a_precise_4xx_or_a_202(db, body):
    node, _ = Node.objects.get_or_create(name="gpu-node-01")
    response = Client().post(URL, body, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {node.issue_token()}")
    assert response.status_code in (202, 400, 403), response.content
    answer = response.json()
    if response.status_code == 202:
        assert answer["accepted"] == 0 and answer["rejected"], answer
    else:
        assert answer["error"]
    assert not UsageSample.objects.exists()


def test_a_body_over_the_limit_is_refused_before_it_is_parsed(db, settings):
    settings.INGEST_MAX_BODY_BYTES = 4096
    node, _ = Node.objects.get_or_create(name="gpu-node-01")
    body = json.dumps({"node": "gpu-node-01", "samples": [{"pad": "x" * 5000}]}).encode()
    response = Client().post(URL, body, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {node.issue_token()}")
    assert response.status_code == 413 and "4096 bytes" in response.json()["error"]


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@st.composite
def near_valid(draw):
    """A sample that is valid, or valid but for one value drawn from a hostile set."""
    good = {
        "gpu_uuid": draw(st.sampled_from(["GPU-a", "GPU-b", "MIG-c/1"])),
        "ts": (NOW - timedelta(minutes=draw(st.integers(0, 3)))).isoformat(),
        "interval_s": draw(st.sampled_from([60, 1, 3600])),
        "allocated": draw(st.booleans()),
        "fraction": draw(st.sampled_from([1.0, 0.25, 1])),
        "util_pct": draw(st.one_of(st.none(), st.floats(0, 100), st.integers(0, 100))),
        "model": draw(st.sampled_from(["NVIDIA H100 80GB HBM3", None])),
        "owner": draw(st.sampled_from([{"namespace": "vision"}, None, {"job": 7},
                                       {"namespace": "vision", "extra": [1]}])),
    }
    if draw(st.booleans()):
        key = draw(st.sampled_from(sorted(good) + ["temp_c", "gpu_index", "mem_used_mib"]))
        good[key] = draw(scalars)
    return good


@settings(max_examples=examples(300), deadline=None)
@given(batch=st.lists(near_valid(), min_size=1, max_size=6))
def test_the_fast_path_accepts_exactly_what_the_per_sample_path_accepts(batch):
    body = json.dumps({"node": "n", "samples": batch}).encode()
    oldest = protocol.Oldest(NOW - timedelta(days=35), "older than raw retention")
    per_sample = protocol.samples(protocol.parse(body).samples, NOW, oldest)
    envelope = wire.parse(body)
    fast = wire._columns(envelope.samples, NOW, oldest) if envelope.typed else None
    if fast is not None:
        columns, rejected, repeats = per_sample
        assert rejected == [] and repeats == 0
        assert lists(fast) == lists(columns)
    either = wire.samples(envelope, NOW, oldest)
    assert (lists(either[0]), *either[1:]) == (lists(per_sample[0]), *per_sample[1:])


def lists(columns: Columns) -> dict[str, list]:
    """Each column as a list (a column may be a list or a tuple)."""
    return {name: list(getattr(columns, name)) for name in FIELDS}
