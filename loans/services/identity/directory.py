"""The directory's groups mapped to tenants, roles and the operators group (DESIGN's "Who logs
in"): a setting names, for each group (a name, or an object id as Microsoft Entra ID sends),
a tenant and a role (`vision:lead`, `vision:member`) or `operators`.

At every sign-in (and each refresh or sync) `apply` makes the memberships the directory
granted exactly those its groups give now: it adds what is missing, changes a role, removes
what the groups no longer give, and never touches a membership an operator made by hand, nor
the operators group where the directory did not grant it. A tenant two groups give at two
roles is led. A person the directory no longer knows is deactivated with their API tokens
(`forget`).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import Group
from django.db import transaction

from core.roles import OPERATORS
from loans.access import allowed
from loans.models import ApiToken, DirectoryAccount, Membership, Tenant

OPERATOR = "operators"


class RoleError(ValueError):
    """A group mapping that cannot be read; the message names the entry."""


@dataclass(frozen=True)
class Grants:
    tenants: dict[str, str] = field(default_factory=dict)  # slug -> role
    operator: bool = False


def parse_roles(mapping: Mapping[str, str]) -> dict[str, tuple[str, str] | str]:
    """{group: (tenant slug, role) or "operators"}; RoleError for an entry it cannot read."""
    out: dict[str, tuple[str, str] | str] = {}
    for group, target in mapping.items():
        group, target = str(group).strip(), str(target).strip()
        if not group:
            raise RoleError(f"an empty group name maps to {target!r}")
        if target == OPERATOR:
            out[group] = OPERATOR
            continue
        slug, sep, role = target.partition(":")
        if not sep or not slug or role not in Membership.Role.values:
            raise RoleError(f"{group!r} maps to {target!r}: write TENANT:lead, TENANT:member "
                            f"or {OPERATOR}")
        out[group] = (slug, role)
    return out


def grants(groups: Iterable[str], roles: Mapping[str, tuple[str, str] | str]) -> Grants:
    """What `groups` give under `roles`; a tenant given as lead and member is led."""
    tenants: dict[str, str] = {}
    operator = False
    for group in groups:
        target = roles.get(group)
        if target == OPERATOR:
            operator = True
        elif target is not None:
            slug, role = target
            if tenants.get(slug) != Membership.Role.LEAD:
                tenants[slug] = role
    return Grants(tenants, operator)


@dataclass(frozen=True)
class Applied:
    added: list[str]
    changed: list[str]
    removed: list[str]
    unknown_tenants: list[str]  # named by the mapping, not in gpuloans


@transaction.atomic
def apply(account: DirectoryAccount, groups: Iterable[str],
          roles: Mapping[str, tuple[str, str] | str], *, now: datetime) -> Applied:
    """The account's directory memberships and operator grant made what `groups` give."""
    groups = sorted(set(groups))
    wanted = grants(groups, roles)
    user = account.user
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=list(wanted.tenants))}
    mine = {m.tenant.slug: m for m in Membership.objects.select_related("tenant")
            .filter(user=user)}
    added, changed, removed = [], [], []
    for slug, role in wanted.tenants.items():
        tenant = tenants.get(slug)
        held = mine.get(slug)
        if tenant is None:
            continue
        if held is None:
            Membership.objects.create(user=user, tenant=tenant, role=role, from_directory=True)
            added.append(slug)
        elif held.from_directory and held.role != role:
            held.role = role
            held.save(update_fields=["role"])
            changed.append(slug)
    for slug, held in mine.items():
        if held.from_directory and slug not in wanted.tenants:
            held.delete()
            removed.append(slug)
    operators, _created = Group.objects.get_or_create(name=OPERATORS)
    # Read afresh: a role is cached on the user object it was asked of (core.roles).
    user = type(user).objects.get(pk=user.pk)
    if wanted.operator and not allowed(user, "operator-pages"):  # not an operator yet
        # An operator is staff in the operators group (core.roles); what was missing the
        # directory granted, and takes back with the group.
        user.groups.add(operators)
        user.is_staff = True
        user.save(update_fields=["is_staff"])
        account.operator_from_directory = True
    elif not wanted.operator and account.operator_from_directory:
        user.groups.remove(operators)
        user.is_staff = False
        user.save(update_fields=["is_staff"])
        account.operator_from_directory = False
    account.groups, account.seen_at = groups, now
    account.save(update_fields=["operator_from_directory", "groups", "seen_at"])
    return Applied(added, changed, removed,
                   sorted(set(wanted.tenants) - set(tenants)))


@transaction.atomic
def forget(account: DirectoryAccount) -> int:
    """The directory no longer knows this person: deactivated, their API tokens revoked and
    their directory memberships removed. Returns the tokens revoked."""
    user = account.user
    user.is_active = False
    user.save(update_fields=["is_active"])
    Membership.objects.filter(user=user, from_directory=True).delete()
    revoked, _by_model = ApiToken.objects.filter(user=user).delete()
    return revoked
