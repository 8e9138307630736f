"""The audit log: a contract changed through each path (a page, the admin, the API with a
token, a command, a Celery job) is found with who did it and what it was before and after;
operators filter and export it, a lead reads only its own tenant's entries."""

import csv
import io
from datetime import UTC, datetime

import pytest
import time_machine
from auditlog.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.urls import reverse

from loans.models import Amendment, ApiToken, Contract, OveragePolicy, Tenant
from loans.tasks import close_periods

pytestmark = pytest.mark.django_db

MOMENT = datetime(2026, 11, 20, 4, tzinfo=UTC)


def of(model, **filters):
    return LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(model),
                                   **filters).order_by("pk")


def test_each_path_that_changes_a_contract_is_in_the_log_with_its_actor(
        client, lead, operator, contract):
    # A page: the lead sets the contract's overage policy.
    client.force_login(lead)
    with time_machine.travel(MOMENT, tick=False):
        client.post(reverse("overage-policy", args=["vision", contract.pk]),
                    {"policy": "budget", "budget": "500"})
    [policy] = of(OveragePolicy)
    assert policy.actor == lead and policy.action == LogEntry.Action.CREATE
    assert policy.changes["kind"] == ["None", "budget"]
    assert policy.additional_data["tenant"] == contract.tenant_id

    # The API, with the operator's token: an amendment names the token and its owner.
    _record, secret = ApiToken.issue(user=operator, name="finance script",
                                     scope=ApiToken.Scope.READ_WRITE)
    client.logout()
    with time_machine.travel(MOMENT, tick=False):
        answer = client.post(f"/api/v1/contracts/{contract.pk}/amendments",
                             {"from_period": 3, "changes": {"committed_gpu_hours": "900"},
                              "reason": "smaller team"}, content_type="application/json",
                             headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 201, answer.content
    [amended] = of(Amendment)
    assert amended.actor == operator
    assert amended.additional_data["token"]["name"] == "finance script"
    assert amended.additional_data["tenant"] == contract.tenant_id

    # The admin: the operator terminates it; the contract's own fields, before and after.
    client.force_login(operator)
    with time_machine.travel(MOMENT, tick=False):
        done = client.post(reverse("admin:loans_amendment_add"), {
            "contract": contract.pk, "terminate": "on", "reason": "team disbanded"})
    assert done.status_code == 302
    [ended] = of(Contract, action=LogEntry.Action.UPDATE)
    assert ended.actor == operator and ended.changes["term_months"] == ["12", "1"]
    assert ended.additional_data["tenant"] == contract.tenant_id

    # A command, then a job: each close is one entry naming the statements it wrote.
    call_command("close_periods", now="2026-12-03T00:00:00+00:00", stdout=io.StringIO())
    [closed] = of(Contract, action=LogEntry.Action.CREATE, changes__has_key="statements_written")
    assert closed.actor is None and closed.additional_data["job"] == "command close_periods"
    assert "1" in closed.changes["statements_written"][1]

    contract.refresh_from_db()
    Contract.objects.filter(pk=contract.pk).update(status=Contract.Status.ACTIVE)
    with time_machine.travel(datetime(2027, 1, 3, tzinfo=UTC), tick=False):
        close_periods.apply()
    jobs = [e.additional_data.get("job") for e in of(Contract)]
    assert "task loans.tasks.close_periods" in jobs


def test_operators_filter_and_export_a_lead_reads_only_its_own_tenant(
        client, lead, member, operator, contract, other_tenant):
    client.force_login(operator)
    with time_machine.travel(MOMENT, tick=False):
        client.post(reverse("admin:loans_amendment_add"), {
            "contract": contract.pk, "terminate": "on", "reason": "team disbanded"})
    Tenant.objects.filter(pk=other_tenant.pk).update(name="Speech")  # logged by no one
    other_tenant.name = "Speech and Audio"
    other_tenant.save()

    page = client.get(reverse("audit"), {"tenant": "speech"})
    assert page.status_code == 200
    shown = page.content.decode()
    assert "Speech and Audio" in shown and "team disbanded" not in shown

    export = client.get(reverse("audit-csv"), {"tenant": "vision", "person": "operator"})
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    assert rows and {r["tenant"] for r in rows} == {"vision"}
    assert {r["who"] for r in rows} == {"operator"}
    assert {"term_months", "reason"} <= {r["field"] for r in rows}

    bad = client.get(reverse("audit"), {"since": "20 Nov", "kind": "x"})
    assert bad.status_code == 400
    assert "must be a day written 2026-11-20" in bad.content.decode()
    assert "Unknown kind" in bad.content.decode()
    assert client.get(reverse("audit-csv"), {"until": "tomorrow"}).status_code == 400

    client.force_login(lead)
    assert client.get(reverse("audit")).status_code == 403
    mine = client.get(reverse("tenant-audit", args=["vision"]))
    assert mine.status_code == 200
    text = mine.content.decode()
    assert "term (months)</span>: 12 → 1" in text and "Speech and Audio" not in text
    assert client.get(reverse("tenant-audit", args=["speech"])).status_code == 404
    client.force_login(member)
    assert client.get(reverse("tenant-audit", args=["vision"])).status_code == 403


def test_secrets_are_masked_and_metered_rows_are_not_logged(operator, tenant):
    record, _secret = ApiToken.issue(user=operator, name="ci")
    [issued] = of(ApiToken)
    assert record.token_hash not in str(issued.changes)
    assert not LogEntry.objects.filter(content_type__model__in=[
        "usagesample", "tenanthour", "statement", "devicerefusal"]).exists()
    before = LogEntry.objects.count()
    tenant.name = tenant.name  # saved unchanged: nothing to log
    tenant.save()
    assert LogEntry.objects.count() == before


def test_who_was_made_an_operator_is_logged(client, operator, lead):
    from django.contrib.auth.models import Group, User

    from core.roles import OPERATORS

    group, _created = Group.objects.get_or_create(name=OPERATORS)
    lead.groups.add(group)
    [entry] = of(User, object_pk=str(lead.pk), changes__has_key="groups")
    assert entry.changes["groups"]["objects"] == [str(group)]
    assert entry.changes["groups"]["operation"] == "add"


def test_a_password_is_never_in_the_log(db):
    from django.contrib.auth.models import User

    from tests.conftest import make_user

    user = make_user("newcomer")
    [entry] = of(User, object_pk=str(user.pk))
    assert user.password not in str(entry.changes)
    assert "last_login" not in entry.changes
