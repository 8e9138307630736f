"""The operators' console, through the pages an operator uses."""

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.template import Context, Template
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from loans.models import Amendment, ApiToken, Contract, Plan, Recommendation, Statement
from metering.models import (
    AttributionRule,
    DeviceRefusal,
    Gpu,
    GpuHour,
    Node,
    Reattribution,
    TenantHour,
    UsageSample,
    default_cluster,
)
from metering.recount import rebuild_rollups
from metering.usage import floor_hour

CHANGELISTS = [
    "loans_tenant", "loans_membership", "loans_plan", "loans_contract", "loans_statement",
    "metering_node", "metering_gpu", "metering_attributionrule", "metering_tenanthour",
    "metering_gpuhour", "metering_usagesample", "auth_user", "loans_apitoken",
    "loans_amendment", "metering_reattribution", "loans_recommendation", "metering_cluster",
    "metering_devicerefusal",
]


# Mid-period for the contract (November in Shanghai), whatever the day the tests run.
MOMENT = datetime(2026, 11, 20, 6, 30, tzinfo=UTC)


@pytest.fixture
def fleet(contract, other_tenant):
    with time_machine.travel(MOMENT, tick=False):
        yield _fleet(contract, other_tenant)


def _fleet(contract, other_tenant):
    node = Node.objects.create(name="gpu-node-01", default_tenant=contract.tenant)
    gpu = Gpu.objects.create(uuid="GPU-aaaa", node=node, index=0, model="NVIDIA H100 80GB HBM3")
    AttributionRule.objects.create(tenant=other_tenant, field="namespace", value="speech")
    now = floor_hour(timezone.now())
    for hour in range(10):
        UsageSample.objects.create(gpu=gpu, ts=now - timedelta(hours=hour),
                                   tenant=contract.tenant, interval_s=3600, allocated=True,
                                   util_pct=40.0)
    rebuild_rollups(now - timedelta(hours=10), now + timedelta(hours=1))
    return node


@pytest.mark.parametrize("name", CHANGELISTS)
def test_every_model_is_listed_with_search_and_filters(client, operator, fleet, name):
    client.force_login(operator)
    url = reverse(f"admin:{name}_changelist")
    assert client.get(url).status_code == 200
    assert client.get(url, {"q": "vision"}).status_code == 200


def test_the_index_lists_the_usage_samples_beside_metering_models(client, operator):
    client.force_login(operator)
    page = client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:metering_usagesample_changelist") in page
    assert reverse("admin:metering_node_changelist") in page


def test_filters_narrow_the_lists(client, operator, fleet):
    client.force_login(operator)
    page = client.get(reverse("admin:loans_contract_changelist"), {"status__exact": "draft"})
    assert "0 contracts" in page.content.decode()
    page = client.get(reverse("admin:metering_node_changelist"), {"token": "no"})
    assert "gpu-node-01" in page.content.decode()
    page = client.get(reverse("admin:metering_node_changelist"), {"token": "yes"})
    assert "gpu-node-01" not in page.content.decode()


def test_contracts_show_the_current_period_used_committed_and_cost(client, operator, fleet):
    client.force_login(operator)
    page = client.get(reverse("admin:loans_contract_changelist")).content.decode()
    # 10 GPU-hours used of 1,000 committed; the commitment costs 10,000.00 CNY whatever is used.
    assert "10.0 / 1,000 (1%)" in page
    assert "10,000.00 CNY" in page


@pytest.mark.parametrize("currency", ["XYZ", "ABC", "cny", "C1Y"])
def test_a_plan_in_a_currency_iso_4217_does_not_list_is_refused(client, operator, currency):
    client.force_login(operator)
    response = client.post(reverse("admin:loans_plan_add"), {
        "name": "Odd money", "base_quota_gpus": 1, "max_quota_gpus": 2,
        "committed_gpu_hours": "100", "committed_rate": "10", "overage_multiplier": "1.2",
        "term_months": 12, "guarantee_pct": "100", "upfront_fee": "0", "currency": currency,
    })
    assert response.status_code == 200
    assert "is not an ISO 4217 currency code" in response.content.decode()
    assert not Plan.objects.filter(name="Odd money").exists()


def test_an_impossible_plan_entered_in_the_admin_gets_a_clear_message(client, operator):
    client.force_login(operator)
    response = client.post(reverse("admin:loans_plan_add"), {
        "name": "Broken", "base_quota_gpus": 8, "max_quota_gpus": 4,
        "committed_gpu_hours": "100", "committed_rate": "10", "overage_multiplier": "1.2",
        "term_months": 12, "guarantee_pct": "100", "upfront_fee": "0", "currency": "CNY",
    })
    assert response.status_code == 200
    assert "The max quota cannot be below the base quota." in response.content.decode()
    assert not Plan.objects.filter(name="Broken").exists()


def test_an_overlapping_contract_entered_in_the_admin_gets_a_clear_message(
    client, operator, contract, plan
):
    client.force_login(operator)
    response = client.post(reverse("admin:loans_contract_add"), {
        "tenant": contract.tenant.pk, "plan": plan.pk, "starts_on": "2027-02-01",
        "time_zone": "Asia/Shanghai", "status": "active",
    })
    assert response.status_code == 200
    assert "already has a contract in force" in response.content.decode()
    assert Contract.objects.count() == 1


def token_on(page: str) -> str:
    return re.search(r'<code class="node-token">([^<]+)</code>', page).group(1)


def test_a_node_added_in_the_admin_shows_its_token_once_and_stores_a_hash(client, operator):
    client.force_login(operator)
    form = client.get(reverse("admin:metering_node_add")).context["adminform"].form
    assert (form["cluster"].value(), form["max_devices"].value()) == (default_cluster(), 8)
    response = client.post(reverse("admin:metering_node_add"), {
        "name": "gpu-node-09", "cluster": default_cluster(), "max_devices": 16})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    token = token_on(response.content.decode())
    node = Node.objects.get(name="gpu-node-09")
    assert token not in (node.token_hash, node.token_prefix)
    assert Node.objects.by_token(token) == node
    change_page = client.get(reverse("admin:metering_node_change", args=[node.pk]))
    assert token not in change_page.content.decode()


def test_rotating_a_token_in_the_admin_retires_the_old_one(client, operator, fleet):
    client.force_login(operator)
    old = fleet.issue_token()
    url = reverse("admin:metering_node_token", args=[fleet.pk, "rotate"])
    assert "Issue a new token" in client.get(url).content.decode()
    new = token_on(client.post(url).content.decode())
    assert new != old
    assert Node.objects.by_token(old) is None
    assert Node.objects.by_token(new) == fleet


def test_revoking_a_token_in_the_admin_locks_the_agent_out(client, operator, fleet):
    client.force_login(operator)
    token = fleet.issue_token()
    response = client.post(reverse("admin:metering_node_token", args=[fleet.pk, "revoke"]))
    assert response.status_code == 302
    assert Node.objects.by_token(token) is None


def test_the_rotate_and_revoke_actions_work_on_many_nodes(client, operator, fleet):
    client.force_login(operator)
    other = Node.objects.create(name="gpu-node-02")
    url = reverse("admin:metering_node_changelist")
    page = client.post(url, {"action": "rotate_tokens", "_selected_action": [fleet.pk, other.pk]})
    tokens = re.findall(r'<code class="node-token">([^<]+)</code>', page.content.decode())
    assert {Node.objects.by_token(t) for t in tokens} == {fleet, other}
    client.post(url, {"action": "revoke_tokens", "_selected_action": [fleet.pk, other.pk]})
    assert all(Node.objects.by_token(t) is None for t in tokens)


def test_statements_and_rollups_cannot_be_edited_from_the_admin(client, operator, fleet):
    client.force_login(operator)
    assert client.get(reverse("admin:loans_statement_add")).status_code == 403
    hour = TenantHour.objects.first()
    assert client.post(reverse("admin:metering_tenanthour_change", args=[hour.pk]),
                       {"allocated_gpu_s": 1}).status_code == 403
    assert GpuHour.objects.exists()


def test_refused_devices_and_a_gpus_tenures_are_read_not_edited_in_the_admin(
        client, operator, fleet):
    gpu = Gpu.objects.get()
    other = Node.objects.create(name="gpu-node-02")
    DeviceRefusal.objects.create(node=other, gpu_uuid=gpu.uuid, reason="other_node",
                                 holder=fleet, first_at=MOMENT, last_at=MOMENT, samples=3)
    client.force_login(operator)
    listing = client.get(reverse("admin:metering_devicerefusal_changelist")).content.decode()
    assert "GPU-aaaa" in listing and "still reported by another node" in listing
    refusal = DeviceRefusal.objects.get()
    assert client.post(reverse("admin:metering_devicerefusal_change", args=[refusal.pk]),
                       {"samples": 0}).status_code == 403
    page = client.get(reverse("admin:metering_gpu_change", args=[gpu.pk])).content.decode()
    assert "device tenures" in page.lower() and "gpu-node-01" in page
    assert client.get(reverse("admin:metering_gpu_add")).status_code == 403
    client.post(reverse("admin:metering_gpu_change", args=[gpu.pk]), {
        "uuid": gpu.uuid, "node": other.pk, "model": gpu.model, "index": 0,
        "tenures-TOTAL_FORMS": 1, "tenures-INITIAL_FORMS": 1})
    assert Gpu.objects.get().node == fleet  # a device moves by its samples, not by hand


def test_the_sample_list_filters_and_answers_bad_input_with_a_message(client, operator, fleet):
    client.force_login(operator)
    url = reverse("admin:metering_usagesample_changelist")
    page = client.get(url, {"node": "gpu-node-01", "tenant": "vision", "q": "aaaa"})
    assert page.content.decode().count("<td>gpu-node-01</td>") == 10
    assert "GPU-aaaa" not in client.get(url, {"tenant": "-"}).content.decode()
    bad = client.get(url, {"since": "yesterday", "page": "x"})
    assert bad.status_code == 400
    assert "yesterday is not a date" in bad.content.decode()
    assert "page must be a whole number" in bad.content.decode()


@pytest.mark.parametrize("actor", ["lead", "member", "outsider"])
def test_tenant_users_are_not_let_into_the_admin(client, request, actor):
    client.force_login(request.getfixturevalue(actor))
    for name in ("admin:index", "admin:metering_usagesample_changelist"):
        response = client.get(reverse(name))
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]


def test_the_admin_speaks_simplified_chinese(client, operator):
    client.force_login(operator)
    page = client.get("/zh-hans/admin/").content.decode()
    assert "<title>运维 | gpuloans</title>" in page
    assert "用量样本" in page and "计量" in page


def test_an_api_token_issued_in_the_admin_is_shown_once_and_works(client, operator, lead):
    client.force_login(operator)
    expires = timezone.now() + timedelta(days=30)
    response = client.post(reverse("admin:loans_apitoken_add"), {
        "user": lead.pk, "name": "grafana", "scope": "read",
        "expires_at_0": f"{expires:%Y-%m-%d}", "expires_at_1": f"{expires:%H:%M:%S}"})
    token = token_on(response.content.decode())
    assert "no-store" in response["Cache-Control"]
    record = ApiToken.objects.get(name="grafana")
    assert record.user == lead and token not in (record.token_hash, record.token_prefix)
    api = Client().get("/api/v1/tenants/vision/usage", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.status_code == 200
    assert record.scope == "read" and record.expires_at is not None
    too_far = timezone.now() + timedelta(days=4000)
    refused = client.post(reverse("admin:loans_apitoken_add"), {
        "user": lead.pk, "name": "forever", "scope": "read",
        "expires_at_0": f"{too_far:%Y-%m-%d}", "expires_at_1": "00:00:00"})
    assert refused.status_code == 200 and "An expiry from now to 3650 days ahead" in (
        refused.content.decode())
    assert not ApiToken.objects.filter(name="forever").exists()


def test_an_operator_amends_a_contract_in_the_admin_and_a_begun_period_is_refused(
        client, operator, contract):
    client.force_login(operator)
    url = reverse("admin:loans_amendment_add")
    with time_machine.travel(MOMENT, tick=False):
        form = client.get(url, {"contract": contract.pk})
        assert form.context["adminform"].form.initial["from_number"] == 2
        response = client.post(url, {"contract": contract.pk, "from_number": 2,
                                     "committed_gpu_hours": "900", "reason": "less work"})
        assert response.status_code == 302, response.context["adminform"].form.errors
        for number in (1, 13):  # the period running now; past the term
            refused = client.post(url, {"contract": contract.pk, "from_number": number,
                                        "committed_gpu_hours": "900", "reason": "r"})
            assert "period 2 to 12" in refused.content.decode()
        nothing = client.post(url, {"contract": contract.pk, "from_number": 2, "reason": "r"})
        assert "Change at least one term" in nothing.content.decode()
    amendment = Amendment.objects.get()
    assert (amendment.from_period, amendment.author) == (1, operator)
    assert amendment.changes == {"committed_gpu_hours": ["1000.00", "900.00"]}
    assert contract.terms_for(1).committed_gpu_hours == 900
    # The contract's page shows it, and no longer lets its signed terms be edited in place.
    page = client.get(reverse("admin:loans_contract_change", args=[contract.pk]))
    assert "less work" in page.content.decode()
    assert "committed_rate" not in page.context["adminform"].form.fields


def test_an_operator_terminates_a_contract_in_the_admin(client, operator, contract):
    client.force_login(operator)
    with time_machine.travel(MOMENT, tick=False):
        response = client.post(reverse("admin:loans_amendment_add"), {
            "contract": contract.pk, "terminate": "on", "reason": "team disbanded"})
    assert response.status_code == 302
    contract.refresh_from_db()
    assert contract.term_months == 1 and contract.ends_on.isoformat() == "2026-12-01"


def test_applying_accepted_recommendations_in_the_admin_writes_their_amendments(
        client, operator, lead, contract):
    rec = Recommendation.objects.create(
        contract=contract, kind="base_quota", current="8", recommended="6", message="m",
        created_at=MOMENT, state="accepted", decided_by=lead, decided_at=MOMENT)
    client.force_login(operator)
    with time_machine.travel(MOMENT, tick=False):
        client.post(reverse("admin:loans_recommendation_changelist"),
                    {"action": "apply", "_selected_action": [rec.pk]})
    rec.refresh_from_db()
    assert rec.state == "applied" and rec.amendment.changes == {"base_quota_gpus": ["8", "6"]}


def test_an_operator_moves_usage_in_the_admin(client, operator, fleet, other_tenant):
    client.force_login(operator)
    url = reverse("admin:metering_reattribution_add")
    start = floor_hour(MOMENT) - timedelta(hours=10)
    with time_machine.travel(MOMENT, tick=False):
        initial = client.get(url, {"scope": "unattributed", "start": start.isoformat()})
        assert initial.context["adminform"].form.initial["start"] == start
        local = start.astimezone(timezone.get_current_timezone())
        response = client.post(url, {
            "scope": "node", "value": "gpu-node-01", "tenant": other_tenant.pk,
            "start_0": local.strftime("%Y-%m-%d"), "start_1": local.strftime("%H:%M:%S"),
            "end_0": MOMENT.astimezone(local.tzinfo).strftime("%Y-%m-%d"),
            "end_1": MOMENT.astimezone(local.tzinfo).strftime("%H:%M:%S"), "reason": "lent"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    move = Reattribution.objects.get()
    assert move.samples == 10 and move.author == operator
    assert TenantHour.objects.filter(tenant=other_tenant).count() == 10


def test_a_renewal_that_leaves_hours_uncovered_is_saved_with_a_warning(client, operator, plan,
                                                                       tenant):
    first = Contract(tenant=tenant, plan=plan, starts_on="2026-01-01", time_zone="Asia/Shanghai",
                     status=Contract.Status.ACTIVE)
    first.full_clean()
    first.save()  # ends 2027-01-01 00:00 in Shanghai: 2026-12-31 16:00 UTC
    client.force_login(operator)
    response = client.post(reverse("admin:loans_contract_add"), {
        "tenant": tenant.pk, "plan": plan.pk, "starts_on": "2027-01-01", "time_zone": "UTC",
        "status": "active", "amendments-TOTAL_FORMS": 0, "amendments-INITIAL_FORMS": 0},
        follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "8 hours between this contract and" in page and "billed by neither" in page
    assert Contract.objects.count() == 2


PREFILLS = ["abc", "\ufffd\ufffd", "99999999999999999999", "2026-13-45T99:00", "1,x"]


def add_forms(client):
    """Each registered model's add form the logged-in client may open, with its model's
    fields (statements, rollups and refusals have none)."""
    for model in admin.site._registry:
        meta = model._meta
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_add")
        if client.get(url).status_code == 200:
            yield url, meta.get_fields()


def test_add_forms_prefilled_from_the_query_string_never_fail(client, operator, fleet):
    """Django's admin fills an add form from its query string (?tenant=3, as links to it
    do). A value its field cannot read made the autocomplete widgets query with it and
    answer 500 (?tenant=abc on a contract, ?contract=abc on an amendment); every add form
    and every field of it is tried with such values."""
    client.force_login(operator)
    tried = 0
    for url, fields in add_forms(client):
        for field in fields:
            if not field.concrete or field.auto_created and not field.is_relation:
                continue
            for value in PREFILLS:
                answer = client.get(url, {field.name: value})
                tried += 1
                assert answer.status_code < 500, (url, field.name, value)
    assert tried > 300


def test_a_posted_key_its_field_cannot_read_is_a_form_error_not_a_500(client, operator, fleet,
                                                                       contract):
    """A form shown again with its errors keeps what was posted, and the autocomplete widgets
    queried with it: a membership's user 'abc', or one past the column's range, was a 500, on
    its own add form and in a tenant's inline."""
    client.force_login(operator)
    tried = 0
    for url, fields in add_forms(client):
        for field in fields:
            if not (field.concrete and field.is_relation):
                continue
            for value in PREFILLS:
                answer = client.post(url, {field.name: value})
                tried += 1
                assert answer.status_code == 200, (url, field.name, value)  # shown again
    assert tried > 50
    page = reverse("admin:loans_tenant_change", args=[contract.tenant_id])
    forms = re.findall(r'name="([\w-]+)-TOTAL_FORMS"', client.get(page).content.decode())
    management = {f"{prefix}-{part}": count for prefix in forms
                  for part, count in (("TOTAL_FORMS", 0), ("INITIAL_FORMS", 0))}
    for value in PREFILLS:
        answer = client.post(page, {
            "slug": contract.tenant.slug, "name": "Renamed", **management,
            "memberships-TOTAL_FORMS": 1, "memberships-0-user": value,
            "memberships-0-role": "lead"})
        assert answer.status_code == 200, value
        assert "Select a valid choice" in answer.content.decode()


def posted_as_shown(page: str) -> dict:
    """What a browser would post of the admin form on `page`, as it is shown."""
    data = {}
    for tag, attrs, inner in re.findall(
            r"<(input|textarea|select)\b([^>]*)>(?:(.*?)</(?:textarea|select)>)?", page, re.S):
        name = re.search(r'name="([^"]+)"', attrs)
        kind = re.search(r'type="([^"]+)"', attrs)
        if name is None or (kind and kind.group(1) in ("submit", "file")):
            continue
        if kind and kind.group(1) == "checkbox" and "checked" not in attrs:
            continue
        if tag == "select":
            chosen = re.search(r'<option value="([^"]*)"[^>]*selected', inner or "")
            value = chosen.group(1) if chosen else ""
        elif tag == "textarea":
            value = inner or ""
        else:
            value = re.search(r'value="([^"]*)"', attrs)
            value = value.group(1) if value else ""
        data[name.group(1)] = html.unescape(value)
    return data


def test_a_contract_posted_with_more_amendment_rows_than_shown_is_not_a_500(client, operator,
                                                                           contract):
    """The contract's amendments are read-only rows; a post claiming more rows than it shows
    (a TOTAL_FORMS a client changed) made the page show blank ones, and their period number
    (from_period + 1 of None) was a 500."""
    client.force_login(operator)
    page = reverse("admin:loans_contract_change", args=[contract.pk])
    data = posted_as_shown(client.get(page).content.decode())
    prefix = next(name[:-len("-TOTAL_FORMS")] for name in data
                  if name.endswith("-TOTAL_FORMS") and name.startswith("amendment"))
    for total in ("3", " 3 "):
        answer = client.post(page, {**data, f"{prefix}-TOTAL_FORMS": total, "status": "bogus"})
        assert answer.status_code == 200


def stray_usage() -> None:
    """An hour of usage two hours ago on a node no rule attributes: unattributed."""
    stray = Gpu.objects.create(uuid="GPU-bbbb", node=Node.objects.create(name="stray"),
                               index=0, model="NVIDIA H100 80GB HBM3")
    hour = floor_hour(timezone.now()) - timedelta(hours=2)
    UsageSample.objects.create(gpu=stray, ts=hour, tenant=None, interval_s=3600,
                               allocated=True, util_pct=10.0)
    rebuild_rollups(hour, hour + timedelta(hours=1))


def test_the_fleet_pages_link_opens_the_move_with_its_dates(client, operator, fleet):
    """The link carried its moments raw: the `+08:00` of an offset read as a space, and the
    form opened with From and Until empty."""
    client.force_login(operator)
    with time_machine.travel(MOMENT, tick=False):
        stray_usage()
        page = client.get("/en/fleet/").content.decode()
        # Whole GPUs as whole numbers beside the guaranteed ones (it said "8.0" beside "4")
        [physical] = re.findall(r'HBM3</td><td class="num">([^<]*)</td>', page)
        assert "." not in physical
        found = re.search(r'id="reattribute" href="([^"]+)"', page)
        assert found, "the fleet page offers to move the unattributed usage"
        link = html.unescape(found.group(1))
        assert "+" not in link.split("?", 1)[1]
        form = client.get(link).context["adminform"].form
    assert form.initial["scope"] == "unattributed"
    assert form.initial["end"] == MOMENT.replace(microsecond=0)
    assert form.initial["end"] - form.initial["start"] >= timedelta(days=28)


def test_a_signed_contract_links_to_amend_terminate_and_its_statements_and_is_not_deleted(
        client, operator, contract):
    """The contract page had no way to amend or terminate (the README says it is linked from
    each contract), and it offered Delete, then refused it."""
    client.force_login(operator)
    page = client.get(reverse("admin:loans_contract_change", args=[contract.pk])).content
    page = html.unescape(page.decode())
    add = reverse("admin:loans_amendment_add")
    assert f'href="{add}?contract={contract.pk}"' in page
    assert f'href="{add}?contract={contract.pk}&terminate=on"' in page
    assert reverse("admin:loans_contract_delete", args=[contract.pk]) not in page
    terminate = client.get(f"{add}?contract={contract.pk}&terminate=on").content.decode()
    assert re.search(r'<input type="checkbox" name="terminate"[^>]* checked>', terminate)
    # Terminating asks for the contract and why only: the term fields are an amendment's.
    assert "Base quota (GPUs)" not in terminate and "From period" not in terminate
    amend = client.get(f"{add}?contract={contract.pk}").content.decode()
    assert "Base quota (GPUs)" in amend and "From period" in amend  # capitalised


def test_a_plan_says_which_overage_rate_applies(client, operator):
    Plan.objects.create(name="Given", base_quota_gpus=1, max_quota_gpus=2,
                        committed_gpu_hours=100, committed_rate=11, overage_rate=15,
                        overage_multiplier="1.2", term_months=12, currency="CNY")
    Plan.objects.create(name="Multiplied", base_quota_gpus=1, max_quota_gpus=2,
                        committed_gpu_hours=100, committed_rate=11, overage_multiplier="1.2",
                        term_months=12, currency="CNY")
    client.force_login(operator)
    page = client.get(reverse("admin:loans_plan_changelist")).content.decode()
    assert "15.00 (the rate given)" in page
    assert "13.20 (11.00 × 1.2)" in page


def test_the_statements_list_fits_its_total_and_completeness(client, operator):
    columns = admin.site._registry[Statement].get_list_display(None)
    assert columns[-2:] == ["total", "complete"] and len(columns) <= 9


def test_the_recent_actions_read_their_objects_in_one_query_a_kind(
        client, operator, contract, django_assert_max_num_queries):
    """Each entry named its object from the text kept at the time; read afresh, a contract's
    name reads its tenant and plan: with select_related, not two queries an entry."""
    kind = ContentType.objects.get_for_model(Contract)
    for _ in range(5):
        LogEntry.objects.create(user=operator, content_type=kind, object_id=str(contract.pk),
                                object_repr="vision / H100 Guaranteed 8 from 2026-11-01",
                                action_flag=CHANGE, change_message="[]")
    template = Template("{% load admin_entries %}{% recent_entries user 10 as log %}"
                        "{% for e in log %}{{ e.shown_repr }}|{% endfor %}")
    with translation.override("zh-hans"), django_assert_max_num_queries(3):
        shown = template.render(Context({"user": operator}))
    assert shown.split("|")[:-1] == ["vision / H100 Guaranteed 8，自 2026-11-01 起"] * 5


def test_a_running_contracts_page_shows_its_policy_fixed_status_dates_and_a_plain_termination(
        client, operator, contract):
    """Status was editable beside "Terminate early"; dates read "Sept. 6, 2026" where the
    pages say 2026-09-06; the termination form showed the term-change fields; the overage
    policy was not on the contract page although operators set it there."""
    from loans.models import OveragePolicy

    client.force_login(operator)
    url = f"/en/admin/loans/contract/{contract.pk}/change/"
    page = client.get(url)
    form = page.context["adminform"].form
    assert "status" not in form.fields  # read, not edited
    html = page.content.decode()
    assert contract.starts_on.isoformat() in html
    assert "Overage policy (the newest is in force)" in html
    terminate = client.get(f"/en/admin/loans/amendment/add/?contract={contract.pk}"
                           "&terminate=on").content.decode()
    assert 'name="terminate"' in terminate and 'name="committed_rate"' not in terminate
    fields = {f: v.value() for f, v in ((n, page.context["adminform"].form[n])
                                        for n in form.fields)}
    inline = "overage_policies"
    data = {**{k: "" if v is None else v for k, v in fields.items()},
            "tenant": contract.tenant_id, "plan": contract.plan_id,
            f"{inline}-TOTAL_FORMS": "1", f"{inline}-INITIAL_FORMS": "0",
            f"{inline}-MIN_NUM_FORMS": "0", f"{inline}-MAX_NUM_FORMS": "1000",
            f"{inline}-0-kind": "hold", f"{inline}-0-budget": "",
            "amendments-TOTAL_FORMS": "0", "amendments-INITIAL_FORMS": "0",
            "amendments-MIN_NUM_FORMS": "0", "amendments-MAX_NUM_FORMS": "1000"}
    answer = client.post(url, data)
    assert answer.status_code == 302, answer.context["adminform"].form.errors if \
        answer.context else answer
    policy = OveragePolicy.objects.get(contract=contract)
    assert (policy.kind, policy.set_by) == ("hold", operator)
