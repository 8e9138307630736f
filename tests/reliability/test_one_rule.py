"""One rule for the admin, the pages and the API (core.roles): operators, a staff user in the
operators group, read every tenant and write what their model permissions allow; a staff user
outside the group holding permissions, even all of them, reads and writes nothing that is
not its own tenants', anywhere. The test walks every model of the admin (its list, its add
form and its actions), every list and write of the operators' API and the operators' pages
for each kind of user, and checks that each answers as the others do."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import NoReverseMatch, reverse

from core.roles import OPERATORS
from loans.models import Amendment, Membership, Plan, Tenant
from metering.models import Cluster, Node

API_LISTS = ["tenant-list", "plan-list", "contract-list", "cluster-list", "node-list",
             "reattribution-list", "burst-list"]
# The operators' API writes, each with a body that the operator's answer shows was read.
API_WRITES = [("plan-list", {"name": ""}), ("cluster-list", {"name": ""}),
              ("node-list", {"name": ""}), ("tenant-list", {"slug": ""})]
PAGES = ["/en/fleet/", "/en/tenants/vision/", "/en/tenants/vision/periods.csv", "/en/advise/"]


def user(name: str, *, staff: bool = True, group: bool = False, codenames=None):
    made = get_user_model().objects.create_user(username=name, password="p", is_staff=staff)
    if group:
        made.groups.add(Group.objects.get(name=OPERATORS))
    if codenames == "all":
        made.user_permissions.add(*Permission.objects.all())
    elif codenames == "view":
        made.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    return made


@pytest.fixture
def users(db, contract):
    lead = user("lead", staff=False)
    Membership.objects.create(user=lead, tenant=contract.tenant, role=Membership.Role.LEAD)
    return {"operator": user("ops", group=True), "writer": user("writer", codenames="all"),
            "viewer": user("viewer", codenames="view"), "lead": lead}


def client_of(who) -> Client:
    client = Client()
    client.force_login(who)
    return client


def admin_urls() -> list[tuple[str, str | None, type]]:
    """Each registered model's list and add form (None where it has none)."""
    out = []
    for model in admin.site._registry:
        meta = model._meta
        try:
            add = reverse(f"admin:{meta.app_label}_{meta.model_name}_add")
        except NoReverseMatch:
            add = None
        out.append((reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"), add,
                    model))
    return out


@pytest.mark.parametrize("who", ["writer", "viewer", "lead"])
def test_whoever_is_not_an_operator_gets_nothing_of_the_operators_anywhere(users, contract,
                                                                          who):
    client = client_of(users[who])
    before = (Plan.objects.count(), Cluster.objects.count(), Node.objects.count(),
              Tenant.objects.count(), Amendment.objects.count())
    for changelist, add, model in admin_urls():
        assert client.get(changelist).status_code == 302, changelist
        if add:
            assert client.get(add).status_code == 302, add
        for action in admin.site._registry[model].actions or []:
            name = action if isinstance(action, str) else action.__name__
            answer = client.post(changelist, {"action": name, "_selected_action": ["1"]})
            assert answer.status_code == 302, (changelist, name)
    for name in API_LISTS:
        answer = client.get(reverse(name))
        # Lists members read show a lead its own tenant's rows and the others none.
        assert answer.status_code in (200, 403), name
        if answer.status_code == 200:
            rows = answer.json()["results"]
            assert rows == [] if who != "lead" else all(
                row.get("tenant", "vision") == "vision" and row.get("slug", "vision") == "vision"
                for row in rows), (name, rows)
    for name, body in API_WRITES:
        assert client.post(reverse(name), body, content_type="application/json"
                           ).status_code == 403, name
    assert client.post(f"/api/v1/contracts/{contract.pk}/amendments", {
        "from_period": 3, "changes": {"committed_gpu_hours": "1"}, "reason": "r"},
        content_type="application/json").status_code in (403, 404)
    assert client.get("/en/fleet/").status_code == 403
    assert client.get("/en/advise/").status_code in (302, 403)
    if who != "lead":  # not a member: the tenant stays unknown, as in the API
        assert client.get("/en/tenants/vision/").status_code == 404
        assert client.get(f"/api/v1/contracts/{contract.pk}/statements").status_code == 404
    assert before == (Plan.objects.count(), Cluster.objects.count(), Node.objects.count(),
                      Tenant.objects.count(), Amendment.objects.count())


def test_an_operator_gets_the_same_everywhere(users, contract):
    client = client_of(users["operator"])
    request = type("Request", (), {"user": users["operator"]})()
    for changelist, add, model in admin_urls():
        # Within the role each model's permissions apply (the group holds the product's).
        model_admin = admin.site._registry[model]
        can = model_admin.has_view_or_change_permission(request)
        assert client.get(changelist).status_code == (200 if can else 403), changelist
        if add:
            can = model_admin.has_add_permission(request)
            assert client.get(add).status_code == (200 if can else 403), add
    for name in API_LISTS:
        assert client.get(reverse(name)).status_code == 200, name
    for name, body in API_WRITES:  # read and refused for its content, not for who asks
        assert client.post(reverse(name), body, content_type="application/json"
                           ).status_code == 400, name
    for page in PAGES:
        assert client.get(page).status_code == 200, page
    assert client.get(f"/api/v1/contracts/{contract.pk}/statements").status_code == 200
