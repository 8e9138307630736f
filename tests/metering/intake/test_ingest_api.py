"""POST /api/v1/samples, spoken the way an agent speaks it (agent protocol v1)."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.db.models import Sum
from django.test import Client, override_settings
from django.utils import timezone

from metering.models import AttributionRule, Gpu, GpuHour, Node, TenantHour, UsageSample
from tests.helpers import assert_rollups_equal_a_recount

URL = "/api/v1/samples"


def minute(k: int = 0) -> datetime:
    base = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    return base + timedelta(minutes=k)


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def sample(gpu: int = 0, k: int = 0, **fields) -> dict:
    return {"gpu_uuid": f"GPU-{gpu:04d}", "gpu_index": gpu, "model": "NVIDIA H100 80GB HBM3",
            "mem_total_mib": 81559, "ts": iso(minute(k)), "interval_s": 60, "allocated": True,
            "fraction": 1.0, "util_pct": 50.0, "mem_used_mib": 1000, "power_w": 300.5,
            "temp_c": 55, "owner": {"namespace": "vision", "pod": "train-0"}, **fields}


def post(client: Client, token: str, samples: list, node: str = "gpu-node-01", **envelope):
    body = {"node": node, "agent_version": "0.1.0", "samples": samples, **envelope}
    return client.post(URL, json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}")


def test_a_batch_is_stored_counted_and_rolled_up(client, token, tenant):
    response = post(client, token, [sample(g, k) for g in range(4) for k in range(30)])
    assert response.status_code == 202
    assert response.json() == {"accepted": 120, "duplicates": 0, "rejected": []}
    assert UsageSample.objects.filter(tenant=tenant).count() == 120
    hours = TenantHour.objects.filter(tenant=tenant)
    assert sum(h.allocated_gpu_s for h in hours) == 120 * 60
    assert max(h.peak_gpus for h in hours) == 4
    assert_rollups_equal_a_recount()


def test_a_batch_posted_three_times_is_counted_once(client, token, tenant):
    batch = [sample(g, k) for g in range(2) for k in range(10)]
    assert post(client, token, batch).json()["accepted"] == 20
    for _ in range(2):
        assert post(client, token, batch).json() == {"accepted": 0, "duplicates": 20,
                                                     "rejected": []}
    assert UsageSample.objects.count() == 20
    assert sum(h.sample_count for h in TenantHour.objects.all()) == 20
    assert_rollups_equal_a_recount()


def test_one_bad_sample_costs_none_of_its_neighbours(client, token):
    batch = [sample(0, 0), sample(0, 1, interval_s=0), sample(0, 2), "not a sample", sample(0, 3)]
    answer = post(client, token, batch).json()
    assert answer["accepted"] == 3
    assert [r["index"] for r in answer["rejected"]] == [1, 3]
    assert UsageSample.objects.count() == 3


def future() -> str:
    return iso(timezone.now() + timedelta(minutes=6))


def ancient() -> str:
    return iso(timezone.now() - timedelta(days=36))


REJECTIONS = [
    ({"gpu_uuid": None}, "gpu_uuid is required"),
    ({"gpu_uuid": "x" * 97}, "gpu_uuid must be at most 96 printable characters"),
    ({"ts": None}, "ts is required"),
    ({"ts": "yesterday"}, "is not an RFC 3339 time"),
    ({"ts": "2026-11-29T10:00:00"}, "is not an RFC 3339 time with a UTC offset"),
    ({"ts": "2026-02-30T10:00:00Z"}, "is not a valid date and time"),
    ({"ts": future}, "in the future by more than 5 minutes"),
    ({"ts": ancient}, "older than raw retention"),
    ({"interval_s": None}, "interval_s is required"),
    ({"interval_s": 0}, "interval_s 0 is out of range (1 to 3600)"),
    ({"interval_s": 3601}, "interval_s 3601 is out of range (1 to 3600)"),
    ({"interval_s": "60"}, "interval_s must be an integer"),
    ({"allocated": None}, "allocated is required"),
    ({"allocated": "yes"}, "allocated is required (true or false)"),
    ({"fraction": 0}, "fraction 0 is out of range (0 < fraction <= 1)"),
    ({"fraction": 1.5}, "fraction 1.5 is out of range"),
    ({"util_pct": 100.5}, "util_pct 100.5 is out of range (0 to 100)"),
    ({"util_pct": True}, "util_pct must be a number"),
    ({"mem_used_mib": -1}, "mem_used_mib -1 is out of range"),
    ({"mem_used_mib": 10**40}, "mem_used_mib"),
    ({"power_w": "lots"}, "power_w must be a number"),
    ({"temp_c": 1000}, "temp_c 1000 is out of range"),
    ({"gpu_index": -1}, "gpu_index -1 is out of range"),
    ({"model": 7}, "model must be a string"),
    ({"owner": "alice"}, "owner must be an object"),
    ({"owner": {"user": ["alice"]}}, "owner.user must be a string"),
    # Text PostgreSQL cannot store, or that is not UTF-8, is refused by name, not a 500.
    ({"gpu_uuid": "GPU-\ud800"}, "gpu_uuid must be at most 96 printable characters"),
    ({"model": "H100 \ud800"}, "model must be printable text"),
    ({"model": "H100\x00"}, "model must be printable text"),
    ({"owner": {"pod": "train\x000"}}, "owner.pod must be a string of at most 253 printable"),
    ({"owner": {"job": 10**30}}, "owner.job must be a string"),
    ({"ts": "\u0662\u0660\u0662\u0666-11-29T10:00:00Z"}, "is not an RFC 3339 time"),
]


@pytest.mark.parametrize(("change", "reason"), REJECTIONS,
                         ids=[reason for _change, reason in REJECTIONS])
def test_every_rejection_names_the_index_and_the_reason(client, token, change, reason):
    change = {key: value() if callable(value) else value for key, value in change.items()}
    bad = {key: value for key, value in {**sample(0, 1), **change}.items() if value is not None}
    answer = post(client, token, [sample(0, 0), bad]).json()
    assert answer["accepted"] == 1
    assert len(answer["rejected"]) == 1
    assert answer["rejected"][0]["index"] == 1
    assert reason in answer["rejected"][0]["error"]


def test_a_different_value_under_a_stored_key_is_reported_not_merged(client, token):
    with time_machine.travel(timezone.now().replace(second=5), tick=False):  # one minute(0)
        post(client, token, [sample(0, 0, util_pct=10.0)])
        answer = post(client, token, [sample(0, 0, util_pct=90.0), sample(0, 1)]).json()
        first = minute(0)
    assert answer["accepted"] == 1
    assert answer["rejected"] == [{"index": 0, "error": (
        "conflict: a different sample is already stored for this gpu_uuid and ts")}]
    assert UsageSample.objects.get(ts=first).util_pct == 10.0
    assert_rollups_equal_a_recount()


def test_a_repeat_inside_one_batch_is_a_duplicate_or_a_conflict(client, token):
    answer = post(client, token, [sample(0, 0), sample(0, 0), sample(0, 0, util_pct=1.0)]).json()
    assert answer["accepted"] == 1 and answer["duplicates"] == 1
    assert answer["rejected"][0]["index"] == 2
    assert "conflict: sample 0" in answer["rejected"][0]["error"]


def test_gpus_are_registered_on_first_sight_and_updated_when_they_change(client, token, node):
    post(client, token, [sample(0, 0)])
    gpu = Gpu.objects.get(uuid="GPU-0000")
    assert (gpu.node, gpu.index, gpu.model, gpu.memory_total_mib) == (
        node, 0, "NVIDIA H100 80GB HBM3", 81559)
    post(client, token, [sample(0, 1, gpu_index=3, model="NVIDIA H200", mem_total_mib=143771)])
    gpu.refresh_from_db()
    assert (gpu.index, gpu.model, gpu.memory_total_mib) == (3, "NVIDIA H200", 143771)
    assert gpu.last_seen_at is not None


def test_the_node_keeps_last_seen_version_and_a_retry_safe_dropped_count(client, token, node):
    post(client, token, [sample(0, 0)], dropped_samples=5, agent_version="0.2.0")
    post(client, token, [sample(0, 0)], dropped_samples=5)  # the same batch, resent
    node.refresh_from_db()
    assert node.agent_version == "0.1.0" and node.last_seen_at is not None
    assert node.dropped_samples == 5
    post(client, token, [sample(0, 1)], dropped_samples=7)
    post(client, token, [sample(0, 2)], dropped_samples=2)  # the agent restarted
    node.refresh_from_db()
    assert node.dropped_samples == 9


def test_usage_is_attributed_at_ingestion_and_unclaimed_usage_is_kept(client, token, tenant,
                                                                       other_tenant, node):
    AttributionRule.objects.create(tenant=other_tenant, field="user", value="bob", priority=5)
    post(client, token, [
        sample(0, 0),
        sample(1, 0, owner={"namespace": "vision", "user": "bob"}),
        sample(2, 0, owner={"namespace": "sandbox"}),
        sample(3, 0, owner=None, allocated=False),
    ])
    tenants = dict(UsageSample.objects.values_list("gpu__uuid", "tenant__slug"))
    assert tenants == {"GPU-0000": "vision", "GPU-0001": "speech", "GPU-0002": None,
                       "GPU-0003": None}
    assert TenantHour.objects.get(tenant=None).allocated_gpu_s == 60
    node.default_tenant = tenant
    node.save()
    post(client, token, [sample(2, 1, owner={"namespace": "sandbox"})])
    assert UsageSample.objects.get(ts=minute(1)).tenant == tenant


def test_mig_slices_count_their_fraction(client, token, tenant):
    slices = [sample(0, 0, gpu_uuid=f"MIG-{k}", fraction=1 / 7, util_pct=100.0) for k in range(3)]
    post(client, token, slices)
    hour = TenantHour.objects.get(tenant=tenant)
    assert hour.allocated_gpu_s == pytest.approx(3 * 60 / 7)
    assert hour.peak_gpus == pytest.approx(3 / 7)
    assert_rollups_equal_a_recount()


def test_a_number_too_large_for_64_bits_rejects_only_its_sample(client, token):
    body = json.dumps({"node": "gpu-node-01", "samples": [sample(0, 0), sample(0, 1)]})
    body = body.replace('"mem_used_mib": 1000', f'"mem_used_mib": {10**30}', 1)
    response = client.post(URL, body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202
    assert response.json()["accepted"] == 1
    assert response.json()["rejected"][0]["index"] == 0


@pytest.mark.parametrize(("body", "message"), [
    (b"{not json", "body is not valid JSON"),
    (b"[1, 2]", "body must be a JSON object"),
    (b'{"samples": []}', "node must be the node's name"),
    (b'{"node": "gpu-node-01", "samples": {}}', "samples must be a list"),
    (b'{"node": "gpu-node-01", "samples": [], "dropped_samples": -1}', "dropped_samples"),
    (b'{"node": "gpu-node-01", "samples": [], "agent_version": 1}', "agent_version"),
    (b'{"node": "gpu-node-01", "samples": [], "agent_version": "0.1\\u0000"}', "agent_version"),
    (b'{"node": "gpu-node-01", "samples": [], "agent_version": "\\ud800"}', "agent_version"),
    (b'{"node": "gpu-node-01", "samples": [{"util_pct": NaN}]}', "body is not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "body is not valid JSON"),
])
def test_a_malformed_envelope_is_a_400_with_a_reason(client, token, body, message):
    response = client.post(URL, body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert not UsageSample.objects.exists()


def test_a_compressed_body_is_a_400_that_says_to_send_plain_json(client, token):
    response = client.post(URL, b"\x1f\x8b\x08\x00", content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400
    assert response.json() == {
        "error": "Content-Encoding 'gzip' is not accepted; send the batch as plain JSON"}


def test_a_chunked_body_the_server_cannot_read_is_a_400_that_asks_for_a_length(client, token):
    """The development server does not decode chunked bodies (gunicorn does: see
    tests/reliability/test_http.py); Django would read such a body as empty."""
    body = json.dumps({"node": "gpu-node-01", "samples": [sample()]})
    response = client.post(URL, body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_TRANSFER_ENCODING="chunked")
    assert response.status_code == 400
    assert "send a Content-Length" in response.json()["error"]
    assert not UsageSample.objects.exists()


def test_an_empty_batch_is_accepted_and_marks_the_node_seen(client, token, node):
    assert post(client, token, []).json() == {"accepted": 0, "duplicates": 0, "rejected": []}
    node.refresh_from_db()
    assert node.last_seen_at is not None


def test_no_token_or_an_unknown_token_is_a_401(client, token):
    response = client.post(URL, "{}", content_type="application/json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Bearer"
    assert post(client, "gpln_not-a-real-token", [sample()]).status_code == 401
    assert post(client, "garbage", [sample()]).status_code == 401


def test_an_address_guessing_tokens_is_throttled_and_a_valid_token_from_it_is_not(
        client, token, settings):
    """Unknown tokens from one address are refused with 429 past the limit; a node's valid
    token from the same address (a NAT, a cluster user on the node) still stores its batch
    (it got 429 before)."""
    settings.INGEST_UNKNOWN_TOKENS_PER_MINUTE = 3
    with time_machine.travel(timezone.now().replace(second=5), tick=False):
        for k in range(3):
            assert post(client, f"gpln_guess-{k}", [sample()]).status_code == 401
        refused = post(client, "gpln_guess-3", [sample()])
        assert refused.status_code == 429 and refused["Retry-After"] == "55"
        assert refused.json() == {"error": "too many unknown tokens from this address"}
        assert post(client, "gpln_guess-4", [sample()]).status_code == 429
        valid = post(client, token, [sample()])
        assert valid.status_code == 202 and valid.json()["accepted"] == 1
    assert UsageSample.objects.count() == 1


def test_a_revoked_token_is_refused(client, token, node):
    node.revoke_token()
    response = post(client, token, [sample()])
    assert response.status_code == 401
    assert response.json() == {"error": "unknown or revoked node token"}


def test_the_token_of_node_a_cannot_post_as_node_b(client, token):
    Node.objects.create(name="gpu-node-02").issue_token()
    response = post(client, token, [sample()], node="gpu-node-02")
    assert response.status_code == 403
    assert "belongs to node 'gpu-node-01'" in response.json()["error"]
    assert not UsageSample.objects.exists()


@override_settings(INGEST_MAX_SAMPLES=3)
def test_a_batch_over_the_limit_is_a_413(client, token):
    response = post(client, token, [sample(0, k) for k in range(4)])
    assert response.status_code == 413
    assert "over the limit of 3" in response.json()["error"]


@override_settings(INGEST_MAX_BODY_BYTES=2048)
def test_a_body_over_the_limit_is_a_413(client, token):
    response = post(client, token, [sample(0, k) for k in range(20)])
    assert response.status_code == 413
    assert "body over 2048 bytes" in response.json()["error"]


@override_settings(INGEST_REQUESTS_PER_MINUTE=2)
def test_a_node_over_its_rate_is_throttled_with_retry_after(client, token):
    # Inside one minute: the window is the clock's minute, and a run crossing one was flaky.
    with time_machine.travel(timezone.now().replace(second=5), tick=False):
        assert post(client, token, [sample(0, 0)]).status_code == 202
        assert post(client, token, [sample(0, 1)]).status_code == 202
        response = post(client, token, [sample(0, 2)])
    assert response.status_code == 429
    assert response["Retry-After"] == "55"


def test_only_post_is_allowed(client):
    assert client.get(URL).status_code == 405


def test_the_endpoint_keeps_request_ids_allowed_hosts_and_a_length_and_sets_no_cookie(client,
                                                                                      token):
    """Agents are answered ahead of the pages' middleware (metering.intake.middleware); what every
    request needs still applies."""
    response = post(client, token, [sample()])
    assert response.status_code == 202
    assert len(response["X-Request-ID"]) == 32
    assert response["Content-Length"] == str(len(response.content))  # else gunicorn chunks it
    assert not response.cookies
    body = json.dumps({"node": "gpu-node-01", "samples": [sample(0, 1)]})
    hostile = client.post(URL, body, content_type="application/json", HTTP_HOST="evil.example",
                          HTTP_AUTHORIZATION=f"Bearer {token}")
    assert hostile.status_code == 400
    assert UsageSample.objects.count() == 1


def test_a_bug_behind_the_endpoint_is_a_logged_json_500(token, monkeypatch, caplog):
    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("metering.intake.api.ingest", broken)
    response = post(Client(raise_request_exception=False), token, [sample()])
    assert response.status_code == 500
    assert response.json() == {"detail": "Server error; it has been logged."}
    assert any(record.exc_info and "a bug" in str(record.exc_info[1])
               for record in caplog.records if record.name == "django.request")


@pytest.mark.postgresql
def test_overlapping_batches_posted_concurrently_leave_exact_rollups(transactional_db, tenant):
    """Two agents' batches and a racing resend of each, all for one tenant and hour at once."""
    nodes = [Node.objects.create(name=f"gpu-node-0{n}", default_tenant=tenant) for n in (1, 2)]
    tokens = [node.issue_token() for node in nodes]

    def batch(n: int) -> list:
        return [sample(8 * n + g, k, owner=None, fraction=0.5 if g % 2 else 1.0)
                for g in range(8) for k in range(0, 60, 2)]

    errors: list = []
    barrier = threading.Barrier(4)

    def agent(n: int) -> None:
        try:
            barrier.wait()
            for _ in range(3):
                response = post(Client(), tokens[n], batch(n), node=nodes[n].name)
                assert response.status_code == 202, response.content
        except Exception as error:  # reported below, with the others
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=agent, args=(n,)) for n in (0, 1, 0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert UsageSample.objects.count() == 2 * 8 * 30
    assert_rollups_equal_a_recount()
    assert max(TenantHour.objects.values_list("peak_gpus", flat=True)) == 2 * (4 + 4 * 0.5)


def test_the_smallest_fractions_and_utilisations_are_stored_and_rolled_up(client, token):
    """Valid to the last bit: PostgreSQL refuses float products that underflow to zero, and a
    batch must not be lost to that inside the rollups."""
    batch = [sample(0, 0, fraction=5e-324, util_pct=50.0), sample(1, 0, util_pct=5e-324),
             sample(2, 0, fraction=1e-200, util_pct=1e-200), sample(3, 0, fraction=5e-324,
                                                                  util_pct=5e-324)]
    response = post(client, token, batch)
    assert response.status_code == 202, response.content[:300]
    assert response.json() == {"accepted": 4, "duplicates": 0, "rejected": []}
    assert_rollups_equal_a_recount()


@pytest.mark.postgresql
def test_a_database_failure_mid_batch_is_a_503_and_stores_nothing(client, token, monkeypatch):
    import psycopg

    from metering.intake import store_postgresql

    copy = store_postgresql._copy

    def lost(*args, **kwargs):  # the COPY went through; the connection is lost before COMMIT
        copy(*args, **kwargs)
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(store_postgresql, "_copy", lost)
    response = post(client, token, [sample(0, 0)])
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "keep the batch and retry" in response.json()["error"]
    assert not UsageSample.objects.exists()


@pytest.mark.postgresql
def test_a_connection_lost_rolling_back_a_retry_is_a_503_not_a_500(client, token, monkeypatch):
    """A retry inside the device limit's guard: the COPY meets the stored keys and the savepoint
    is rolled back; when PostgreSQL goes away at that moment the rollback fails too, and the
    transaction is broken. The batch was a 500 (Django refused the checked path's queries in a
    broken transaction); it is a 503, kept and retried by the agent."""
    from django.db import OperationalError

    from metering.intake import device_limit

    batch = [sample(0, 0), sample(1, 0)]
    assert post(client, token, batch).status_code == 202
    device_limit._hours_seen.clear()  # another worker: the batch needs the guard

    def lost(*args, **kwargs):  # as Django's cursor raises it
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(connection, "_savepoint_rollback", lost)
    response = post(client, token, batch)
    assert response.status_code == 503, response.content[:300]
    assert "keep the batch and retry" in response.json()["error"]


@pytest.mark.postgresql
def test_a_retry_after_the_database_connection_was_lost_is_counted_once(transactional_db, tenant):
    """A retried batch goes through the staging table, which lives in the database session: a
    new session (after a restart or a dropped connection) must get its own."""
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="vision")
    token = Node.objects.create(name="gpu-node-01").issue_token()
    client = Client()
    batch = [sample(g, 0) for g in range(3)]
    assert post(client, token, batch).json()["accepted"] == 3
    assert post(client, token, batch).json()["duplicates"] == 3  # a retry, in this session
    connection.close()  # the session is gone, as after a PostgreSQL restart
    response = post(client, token, batch + [sample(3, 0)])
    assert response.status_code == 202, response.content[:300]
    assert response.json() == {"accepted": 1, "duplicates": 3, "rejected": []}
    assert_rollups_equal_a_recount()


def test_a_sample_whose_holder_is_unknown_is_kept_but_counts_as_a_gap_in_completeness(
        client, token, tenant):
    """An agent whose scheduler could not be read marks its samples (agent.holders): what they
    measured is stored, and their time is not reported time, on either database."""
    unknown = [sample(0, k, allocated=False, owner=None, holder_unknown=True) for k in range(5)]
    known = [sample(1, k) for k in range(5)]
    assert post(client, token, unknown + known).json() == {"accepted": 10, "duplicates": 0,
                                                           "rejected": []}
    stored = dict(UsageSample.objects.values_list("gpu__uuid", "holder_unknown").distinct())
    assert stored == {"GPU-0000": True, "GPU-0001": False}
    # Summed over the GPU's hour rows: five minutes up to now may straddle an hour.
    reported = dict(GpuHour.objects.values("gpu__uuid").annotate(s=Sum("reported_s"))
                    .values_list("gpu__uuid", "s"))
    assert reported == {"GPU-0000": 0.0, "GPU-0001": 300.0}
    assert_rollups_equal_a_recount()
    # A resend must repeat the mark: the same key with another answer is a conflict.
    again = post(client, token, [sample(0, 0, allocated=False, owner=None)]).json()
    assert again["rejected"][0]["error"].startswith("conflict")
    assert post(client, token, unknown).json()["duplicates"] == 5


def test_a_holder_unknown_that_is_not_true_or_false_rejects_only_its_sample(client, token):
    answer = post(client, token, [sample(0, 0, holder_unknown="yes"), sample(0, 1)]).json()
    assert answer["accepted"] == 1
    assert answer["rejected"] == [{"index": 0,
                                   "error": "holder_unknown must be true or false, not yes"}]
