"""The directory's groups owning only the memberships they granted, against a model written
here: whatever an operator made by hand, and whatever a person's groups were before, a
sign-in leaves exactly the hand-made memberships plus what the groups give now."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.roles import OPERATORS, is_operator
from loans.models import ApiToken, DirectoryAccount, Membership, Tenant
from loans.services.identity import directory
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 7, 9, tzinfo=UTC)
SLUGS = ["vision", "nlp", "speech"]
GROUPS = [f"g{k}" for k in range(5)]
ROLE = st.sampled_from(["lead", "member"])
TARGET = st.one_of(st.just("operators"),
                   st.tuples(st.sampled_from(SLUGS + ["gone"]), ROLE).map(":".join))


def expected(groups: set[str], roles: dict[str, str]) -> tuple[dict[str, str], bool]:
    """The model: each tenant a group gives, led where any group gives it led."""
    out: dict[str, str] = {}
    for group in sorted(groups):
        target = roles.get(group)
        if target and target != "operators":
            slug, role = target.split(":")
            out[slug] = "lead" if "lead" in (out.get(slug), role) else role
    return out, any(roles.get(g) == "operators" for g in groups)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(roles=st.dictionaries(st.sampled_from(GROUPS), TARGET, max_size=5),
       by_hand=st.dictionaries(st.sampled_from(SLUGS), ROLE, max_size=3),
       operator_by_hand=st.booleans(),
       sign_ins=st.lists(st.sets(st.sampled_from(GROUPS)), min_size=1, max_size=3))
def test_a_sign_in_leaves_the_hand_made_and_what_the_groups_give_now(
        db, roles, by_hand, operator_by_hand, sign_ins):
    with transaction.atomic():
        tenants = {s: Tenant.objects.create(slug=s, name=s.title()) for s in SLUGS}
        user = make_user("ada")
        if operator_by_hand:  # an operator as create_operator makes one: staff in the group
            user.is_staff = True
            user.save()
            user.groups.add(Group.objects.get_or_create(name=OPERATORS)[0])
        for slug, role in by_hand.items():
            Membership.objects.create(user=user, tenant=tenants[slug], role=role)
        account = DirectoryAccount.objects.create(user=user, source="oidc", subject="sub-ada")
        parsed = directory.parse_roles(roles)
        for groups in sign_ins:
            done = directory.apply(account, groups, parsed, now=NOW)
            wanted, operator = expected(groups, roles)
            held = {m.tenant.slug: (m.role, m.from_directory)
                    for m in Membership.objects.filter(user=user).select_related("tenant")}
            assert {s: r for s, (r, mine) in held.items() if not mine} == by_hand
            assert {s: r for s, (r, mine) in held.items() if mine} == {
                s: r for s, r in wanted.items() if s not in by_hand and s in tenants}
            user.refresh_from_db()
            user.__dict__.pop("_gpuloans_operator", None)
            assert is_operator(user) == (operator_by_hand or operator)
            assert ("gone" in done.unknown_tenants) == ("gone" in wanted)
        transaction.set_rollback(True)


def test_a_mapping_it_cannot_read_is_named():
    with pytest.raises(directory.RoleError, match="'gpu-x' maps to 'vision:owner'"):
        directory.parse_roles({"gpu-x": "vision:owner"})
    assert directory.parse_roles({"id-0b1c": "vision:lead", "ops": "operators"}) == {
        "id-0b1c": ("vision", "lead"), "ops": "operators"}


def test_a_person_the_directory_forgets_is_deactivated_with_their_tokens(tenant):
    user = make_user("gone")
    account = DirectoryAccount.objects.create(user=user, source="ldap", subject="uid=gone")
    directory.apply(account, ["leads"], {"leads": ("vision", "lead")}, now=NOW)
    ApiToken.issue(user=user, name="script")
    Membership.objects.create(user=make_user("kept"), tenant=tenant)
    assert directory.forget(account) == 1
    user.refresh_from_db()
    assert not user.is_active and not ApiToken.objects.filter(user=user).exists()
    assert not Membership.objects.filter(user=user).exists()
    assert Membership.objects.filter(user__username="kept").exists()
