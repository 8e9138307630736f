"""Burst requests through the API: granted, queued, granted when GPUs free up, rejected over the
cap, raced for, revoked; who may do what; the quota manifests they change."""

import threading
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import yaml
from django.core import mail
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from config.celery import app
from loans.models import BurstRequest, Contract, Membership
from loans.services import bursts
from metering.models import AttributionRule, Gpu, Node

URL = "/api/v1/bursts/"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def pool(contract, other_tenant, plan):
    """20 H100s; vision and speech each hold a base quota of 8: 4 GPUs left to burst into."""
    theirs = Contract(tenant=other_tenant, plan=plan, starts_on=date(2026, 11, 1),
                      time_zone="Asia/Shanghai", status=Contract.Status.ACTIVE)
    theirs.full_clean()
    theirs.save()
    node = Node.objects.create(name="h100-pool")
    seen = timezone.now()
    Gpu.objects.bulk_create(Gpu(uuid=f"GPU-pool-{i}", node=node, index=i, model=H100,
                                last_seen_at=seen) for i in range(20))
    return theirs


def ask(client, user, contract, gpus: int, hours: int = 8, start_in: int = 0, headers=None,
        **extra):
    client.force_login(user)
    start = timezone.now() + timedelta(hours=start_in)
    return client.post(URL, {"contract": contract.pk, "gpus": gpus,
                             "starts_at": start.isoformat(),
                             "ends_at": (start + timedelta(hours=hours)).isoformat(),
                             "reason": "training run", **extra}, content_type="application/json",
                       headers=headers)


def act(client, user, burst_id: int, what: str, **body):
    client.force_login(user)
    return client.post(f"{URL}{burst_id}/{what}/", body, content_type="application/json")


def test_a_request_that_fits_is_granted_at_once(client, lead, contract, pool):
    response = ask(client, lead, contract, 3)
    assert response.status_code == 201
    body = response.json()
    assert body["state"] == "granted"
    assert [e["state"] for e in body["events"]] == ["queued", "granted"]


def test_the_queue_jobs_notes_are_said_in_the_callers_language(client, lead, contract, pool):
    """They were stored as English sentences and stayed English for a Chinese reader."""
    body = ask(client, lead, contract, 3).json()
    assert body["note"] == "granted: the pool had room"
    again = client.get(f"{URL}{body['id']}/", headers={"Accept-Language": "zh-hans"}).json()
    assert again["note"] == "已授予：资源池有空余"
    assert [e["note"] for e in again["events"]] == ["已申请", "已授予：资源池有空余"]
    request = BurstRequest.objects.get(pk=body["id"])
    assert request.note == "granted: the pool had room"  # its English, for mail and search


def test_a_request_the_pool_cannot_hold_waits_and_is_granted_when_gpus_free(
        client, lead, operator, contract, pool):
    first = ask(client, lead, contract, 3).json()
    waiting = ask(client, lead, contract, 3).json()  # one GPU left in the pool
    assert waiting["state"] == "queued"
    assert bursts.process_queue(timezone.now()).granted == 0
    act(client, lead, first["id"], "cancel", note="finished early")
    assert bursts.process_queue(timezone.now()).granted == 1
    assert BurstRequest.objects.get(pk=waiting["id"]).state == "granted"


def test_a_request_over_the_max_quota_is_rejected_with_the_reason(client, lead, contract, pool):
    body = ask(client, lead, contract, 9).json()  # 8 base + 9 > 16
    assert body["state"] == "rejected"
    assert "over the max quota of 16" in body["note"]


def test_the_queue_is_first_come_first_served_unless_an_operator_prioritises(
        client, lead, outsider, operator, contract, pool):
    ask(client, lead, contract, 3)  # granted: one GPU left
    big = ask(client, outsider, pool, 2).json()
    small = ask(client, lead, contract, 1).json()
    # One GPU is free and the small request fits, but the big one came first.
    assert (big["state"], small["state"]) == ("queued", "queued")
    act(client, operator, small["id"], "prioritise", priority=5)
    assert bursts.process_queue(timezone.now()).granted == 1
    assert BurstRequest.objects.get(pk=small["id"]).state == "granted"
    assert BurstRequest.objects.get(pk=big["id"]).state == "queued"


def test_an_operator_revokes_a_grant_and_the_queue_moves(client, lead, outsider, operator,
                                                         contract, pool):
    granted = ask(client, lead, contract, 4).json()
    waiting = ask(client, outsider, pool, 2).json()
    response = act(client, operator, granted["id"], "revoke", note="maintenance")
    assert response.json()["state"] == "revoked"
    assert response.json()["events"][-1]["note"] == "maintenance"
    bursts.process_queue(timezone.now())
    assert BurstRequest.objects.get(pk=waiting["id"]).state == "granted"


def test_a_queued_request_whose_window_passed_expires(client, lead, contract, pool, settings):
    ask(client, lead, contract, 4)
    late = ask(client, lead, contract, 2, hours=1).json()
    assert bursts.process_queue(timezone.now() + timedelta(hours=2)).expired == 1
    assert BurstRequest.objects.get(pk=late["id"]).state == "expired"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_two_requests_racing_for_the_last_gpus_exactly_one_wins(contract, pool, lead, outsider):
    barrier, results = threading.Barrier(2), []
    now = timezone.now()

    def request(user, contract_):
        barrier.wait()
        try:
            results.append(bursts.submit(contract=contract_, user=user, gpus=3, starts_at=now,
                                         ends_at=now + timedelta(hours=4), reason="race",
                                         now=now).state)
        finally:
            connection.close()

    threads = [threading.Thread(target=request, args=(lead, contract)),
               threading.Thread(target=request, args=(outsider, pool))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["granted", "queued"]


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_one_form_sent_twice_at_once_asks_once(contract, pool, lead):
    barrier, results = threading.Barrier(2), []
    now = timezone.now()

    def request():
        barrier.wait()
        try:
            results.append(bursts.submit(contract=contract, user=lead, gpus=1, starts_at=now,
                                         ends_at=now + timedelta(hours=4), reason="twice",
                                         now=now, submission="one-form").repeated)
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert BurstRequest.objects.filter(submission="one-form").count() == 1


def test_who_may_do_what(client, lead, member, outsider, operator, contract, pool):
    burst = ask(client, lead, contract, 2).json()
    assert ask(client, member, contract, 1).status_code == 403  # members do not ask
    assert ask(client, outsider, contract, 1).status_code == 400  # not their contract
    assert act(client, outsider, burst["id"], "cancel").status_code == 404
    client.force_login(outsider)
    assert client.get(f"{URL}{burst['id']}/").status_code == 404
    assert [b["id"] for b in client.get(URL).json()["results"]] == []
    assert act(client, lead, burst["id"], "revoke").status_code == 403  # operators revoke
    assert act(client, member, burst["id"], "cancel").status_code == 403
    client.force_login(member)
    assert [b["id"] for b in client.get(URL).json()["results"]] == [burst["id"]]
    assert act(client, operator, burst["id"], "approve").status_code == 409  # already granted
    assert act(client, lead, burst["id"], "cancel").json()["state"] == "cancelled"


@pytest.mark.parametrize(("change", "message"), [
    ({"gpus": 0}, "greater than or equal to 1"),
    ({"ends_at": "2020-01-01T00:00:00Z"}, "The end must be after the start"),
    ({"ends_at": "yesterday"}, "Datetime has wrong format"),
    ({"gpus": "many"}, "A valid integer is required"),
])
def test_bad_requests_get_clear_answers(client, lead, contract, pool, change, message):
    client.force_login(lead)
    start = timezone.now()
    body = {"contract": contract.pk, "gpus": 1, "starts_at": start.isoformat(),
            "ends_at": (start + timedelta(hours=2)).isoformat(), "reason": "x", **change}
    response = client.post(URL, body, content_type="application/json")
    assert response.status_code == 400
    assert message in response.content.decode()


def test_a_burst_longer_than_the_limit_is_refused(client, lead, contract, pool):
    response = ask(client, lead, contract, 1, hours=32 * 24)
    assert response.status_code == 400
    assert "at most 31 days" in response.json()["detail"]


def test_burst_changes_are_notified_like_alerts(client, lead, tenant, contract, pool,
                                                django_capture_on_commit_callbacks):
    import loans.tasks  # noqa: F401 - registered, as in a worker: eager runs it here

    tenant.alert_emails = "lead@example.com"
    tenant.save()
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            ask(client, lead, contract, 2)
    finally:
        app.conf.task_always_eager = False
    assert [m.subject for m in mail.outbox] == ["[gpuloans] Vision Lab: burst granted"]


def test_the_manifests_carry_base_plus_granted_bursts(client, lead, operator, tenant, contract,
                                                      pool):
    AttributionRule.objects.create(tenant=tenant, field="namespace", value="team-vision")
    ask(client, lead, contract, 3)
    client.force_login(lead)
    response = client.get("/api/v1/tenants/vision/quota-manifests")
    assert response["Content-Type"].startswith("application/yaml")
    quota, queue = yaml.safe_load_all(response.content)
    assert quota == {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "gpuloans-gpu", "namespace": "team-vision", "labels": {
            "app.kubernetes.io/managed-by": "gpuloans", "gpuloans/tenant": "vision"}},
        "spec": {"hard": {"requests.nvidia.com/gpu": "11", "limits.nvidia.com/gpu": "11"}},
    }
    assert queue["apiVersion"] == "kueue.x-k8s.io/v1beta1" and queue["kind"] == "ClusterQueue"
    assert queue["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-vision"}}
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == "nvidia-h100-80gb-hbm3"
    assert flavor["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 11, "borrowingLimit": 0}]
    client.force_login(operator)
    assert client.get("/api/v1/tenants/speech/quota-manifests").status_code == 200


def test_the_manifests_command_prints_every_tenant(lead, contract, pool, capsys):
    call_command("quota_manifests")
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["kind"], d["metadata"].get("namespace")) for d in docs] == [
        ("ResourceQuota", "speech"), ("ClusterQueue", None),
        ("ResourceQuota", "vision"), ("ClusterQueue", None)]


def test_manifests_of_another_tenant_are_unknown_to_a_lead(client, lead, contract, pool):
    client.force_login(lead)
    assert client.get("/api/v1/tenants/speech/quota-manifests").status_code == 404
    Membership.objects.filter(user=lead).delete()
    assert client.get("/api/v1/tenants/vision/quota-manifests").status_code == 404


def test_a_lead_asks_and_cancels_from_the_tenant_page(client, lead, member, contract, pool):
    client.force_login(lead)
    page = client.get("/en/tenants/vision/").content.decode()
    assert 'id="bursts"' in page and "Ask for GPUs" in page
    shanghai = ZoneInfo("Asia/Shanghai")
    tomorrow = timezone.now().astimezone(shanghai).date() + timedelta(days=1)
    response = client.post(f"/en/tenants/vision/contracts/{contract.pk}/bursts/", {
        "gpus": 2, "starts_at": f"{tomorrow}T20:00", "ends_at": f"{tomorrow}T23:00",
        "reason": "ablation sweep"}, follow=True)
    # Said once, with why: it read "Burst request granted. granted: the pool had room".
    assert "Granted: the pool had room" in response.content.decode()
    assert "Burst request granted" not in response.content.decode()
    burst = BurstRequest.objects.get()
    # The form's times are the contract's wall clock (Asia/Shanghai, UTC+8).
    assert burst.starts_at == datetime.combine(tomorrow, time(20), shanghai)
    assert burst.starts_at.astimezone(UTC).hour == 12
    assert 'data-state="granted"' in response.content.decode()
    client.force_login(member)
    assert "Ask for GPUs" not in client.get("/en/tenants/vision/").content.decode()
    client.post(f"/en/tenants/vision/bursts/{burst.pk}/cancel/")
    assert BurstRequest.objects.get().state == "granted"  # members do not cancel
    client.force_login(lead)
    client.post(f"/en/tenants/vision/bursts/{burst.pk}/cancel/")
    assert BurstRequest.objects.get().state == "cancelled"


def test_the_form_says_the_most_that_fits_and_a_refused_request_stays_on_the_list(
        client, lead, contract, pool):
    """The GPU field allowed 100,000 where 8 more fit under the max quota; a request an
    operator refused showed in the admin only."""
    client.force_login(lead)
    page = client.get("/en/tenants/vision/")
    assert page.context["burst_form"].fields["gpus"].max_value == 8  # max 16 - base 8
    assert 'max="8"' in page.content.decode() and "Extra GPUs (at most 8)" in (
        page.content.decode())
    _form_post(client, contract, "one-form")
    BurstRequest.objects.update(state="rejected")  # as an operator's rejection leaves it
    shown = client.get("/en/tenants/vision/").content.decode()
    assert 'data-state="rejected"' in shown


def test_a_bad_form_says_what_is_wrong(client, lead, contract, pool):
    client.force_login(lead)
    response = client.post(f"/en/tenants/vision/contracts/{contract.pk}/bursts/", {
        "gpus": "0", "starts_at": "soon", "ends_at": "2026-12-01T08:00", "reason": ""},
        follow=True)
    page = response.content.decode()
    assert "Extra GPUs: Ensure this value is greater than or equal to 1." in page
    assert "From: Enter a valid date/time." in page
    assert BurstRequest.objects.count() == 0


def _form_post(client, contract, key: str, **values):
    shanghai = ZoneInfo("Asia/Shanghai")
    tomorrow = timezone.now().astimezone(shanghai).date() + timedelta(days=1)
    return client.post(f"/en/tenants/vision/contracts/{contract.pk}/bursts/", {
        "gpus": 2, "starts_at": f"{tomorrow}T20:00", "ends_at": f"{tomorrow}T23:00",
        "reason": "ablation sweep", "submission": key, **values}, follow=True)


def test_the_same_form_sent_twice_asks_once(client, lead, contract, pool):
    """It granted twice (4 GPUs of the pool's 4 for one request sent twice)."""
    client.force_login(lead)
    page = client.get("/en/tenants/vision/")
    key = page.context["burst_form"].initial["submission"]
    assert len(key) >= 16 and key != client.get(
        "/en/tenants/vision/").context["burst_form"].initial["submission"]
    first = _form_post(client, contract, key)
    assert "Granted: the pool had room" in first.content.decode()
    again = _form_post(client, contract, key)
    assert "This request was sent already; it is granted." in again.content.decode()
    assert BurstRequest.objects.count() == 1
    assert BurstRequest.objects.get().submission == key
    _form_post(client, contract, "another-form")  # a new form asks anew
    assert BurstRequest.objects.count() == 2


def test_a_refused_form_says_why_in_the_burst_card_and_keeps_what_was_typed(
        client, lead, contract, pool):
    """The messages showed in the Recommendations card and the form came back empty."""
    client.force_login(lead)
    page = _form_post(client, contract, "k1", gpus=2, ends_at="2020-01-01T00:00")
    html = page.content.decode()
    card = html[html.index('id="bursts"'):html.index('id="recommendations"')]
    assert "The end must be after the start." in card
    assert "The end must be after the start." not in html[html.index('id="recommendations"'):]
    form = page.context["burst_form"]
    assert form.initial["reason"] == "ablation sweep"
    assert form.initial["ends_at"] == "2020-01-01T00:00"
    assert 'value="ablation sweep"' in card
    assert BurstRequest.objects.count() == 0
    # Shown once: the next visit has an empty form with a new key.
    fresh = client.get("/en/tenants/vision/").context["burst_form"]
    assert "reason" not in fresh.initial and fresh.initial["submission"] != "k1"


def test_an_api_retry_with_the_same_idempotency_key_gets_the_same_request(
        client, lead, contract, pool):
    first = ask(client, lead, contract, 3, headers={"Idempotency-Key": "run-42"})
    assert first.status_code == 201
    again = ask(client, lead, contract, 3, headers={"Idempotency-Key": "run-42"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert BurstRequest.objects.count() == 1
    for bad in ("x" * 65, "tab\there"):
        response = ask(client, lead, contract, 1, headers={"Idempotency-Key": bad})
        assert response.status_code == 400
        assert "submission key" in response.json()["detail"]
    assert BurstRequest.objects.count() == 1


def test_the_fleet_shows_each_pool_over_the_coming_week(client, lead, operator, contract, pool):
    ask(client, lead, contract, 3)
    client.force_login(operator)
    (chart,) = client.get("/en/fleet/").context["pools"]
    by_name = {t["name"]: t for t in chart["figure"]["data"]}
    assert by_name["Guaranteed"]["y"][0] == 16
    assert by_name["Granted bursts"]["y"][0] == 3
    assert by_name["Free"]["y"][0] == 1
    assert by_name["Physical GPUs"]["y"] == [20, 20]
    assert len(by_name["Free"]["x"]) == 7 * 24


def test_an_operator_cannot_approve_what_the_pool_cannot_hold_in_any_path(
        client, lead, operator, contract, pool):
    """An operator approved a queued 16-GPU burst in the admin ("1 done.") while the pool had
    12 free: the pool then held 44 GPUs granted against 40 physical."""
    ask(client, lead, contract, 3)  # granted: one GPU left in the pool
    waiting = ask(client, lead, contract, 3).json()
    assert waiting["state"] == "queued"
    answer = act(client, operator, waiting["id"], "approve")
    assert answer.status_code == 409
    assert "has 1 GPUs free over the window and this request asks for 3" in answer.json()[
        "detail"]
    client.force_login(operator)
    page = client.post("/en/admin/loans/burstrequest/", {
        "action": "approve", "_selected_action": [waiting["id"]]}, follow=True)
    text = page.content.decode()
    assert "1 done." not in text and "1 granted" not in text
    assert f"#{waiting['id']}: Not granted" in text
    assert BurstRequest.objects.get(pk=waiting["id"]).state == "queued"


def test_the_burst_card_says_each_error_at_once_the_queue_place_and_what_hours_cost(
        client, lead, outsider, contract, pool):
    """20 GPUs and an end before the start named only the date; a queued request said
    "Queued" with no place; the form said nothing of what burst hours cost; the table said
    the state twice ("Granted" over "granted: the pool had room")."""
    client.force_login(lead)
    shanghai = ZoneInfo("Asia/Shanghai")
    tomorrow = timezone.now().astimezone(shanghai).date() + timedelta(days=1)
    page = client.post(f"/en/tenants/vision/contracts/{contract.pk}/bursts/", {
        "gpus": 20, "starts_at": f"{tomorrow}T20:00", "ends_at": f"{tomorrow}T08:00",
        "reason": "sweep"}, follow=True).content.decode()
    assert "Until: The end must be after the start." in page
    assert "At most 8: the max quota of 16 GPUs less the base quota of 8." in page
    assert "billed at the overage rate, 12.00 a GPU-hour" in page
    ask(client, lead, contract, 3)  # granted: one GPU left in the pool
    ask(client, outsider, pool, 2)  # queued first
    waiting = ask(client, lead, contract, 3).json()
    assert waiting["state"] == "queued"
    client.force_login(lead)
    page = client.get("/en/tenants/vision/").content.decode()
    assert 'data-place="2"' in page and "place 2 in the queue" in page
    assert page.count("the pool had room") == 1 and ">Granted<" not in page
