"""Who may see which tenant: the one place every page and endpoint asks."""

from django.db.models import QuerySet
from django.http import Http404

from core.roles import OPERATORS, is_operator, may  # noqa: F401 - asked here by the apps
from loans.models import Contract, Membership, Tenant


def tenants_for(user) -> QuerySet[Tenant]:
    """Operators see every tenant; everyone else the tenants they are a member of."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if is_operator(user):
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user).distinct()


def tenant_for_user(user, slug: str) -> Tenant:
    """The tenant if this user may see it; otherwise 404, so others' tenants stay unknown."""
    tenant = tenants_for(user).filter(slug=slug).first()
    if tenant is None:
        raise Http404("No such tenant.")
    return tenant


def contract_for_user(user, pk: int) -> Contract:
    """A contract of a tenant this user may see; otherwise 404."""
    contract = (
        Contract.objects.select_related("tenant", "plan")
        .filter(pk=pk, tenant__in=tenants_for(user)).first()
    )
    if contract is None:
        raise Http404("No such contract.")
    return contract


def is_lead(user, tenant_id: int) -> bool:
    """Leads decide for their tenant: recommendations, burst requests."""
    return Membership.objects.filter(user=user, tenant_id=tenant_id,
                                     role=Membership.Role.LEAD).exists()
