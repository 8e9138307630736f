"""Who may see which tenant, and who may change what: the one place every page and endpoint
asks. Reading answers 404 for what a caller may not see; a write a caller may not make raises
one refusal, Refused, with the reason (the API answers it 403; the pages show its text)."""

from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext_lazy as _
from rest_framework.exceptions import PermissionDenied

from core.roles import OPERATORS, is_operator, may  # noqa: F401 - asked here by the apps
from loans.models import ApiToken, Channel, Contract, Membership, SharingGroup, Tenant


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


def tenant_contract_for_user(user, slug: str, contract_id: int) -> tuple[Tenant, Contract]:
    """A tenant this user may see and one of its contracts (the page forms' target); 404
    otherwise."""
    tenant = tenant_for_user(user, slug)
    contract = tenant.contracts.filter(pk=contract_id).first()
    if contract is None:
        raise Http404(_("This tenant has no such contract."))
    return tenant, contract


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
    """Leads decide for their tenant: recommendations, burst requests. One query a request
    and tenant, however many rules ask (kept on the request's user, as core.roles keeps the
    operator role)."""
    if not user.is_authenticated:
        return False
    known = user.__dict__.setdefault("_gpuloans_leads", {})
    if tenant_id not in known:
        known[tenant_id] = Membership.objects.filter(
            user=user, tenant_id=tenant_id, role=Membership.Role.LEAD).exists()
    return known[tenant_id]


def tenants_led_by(user) -> QuerySet[Tenant]:
    """Operators: every tenant; everyone else the tenants they lead."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if is_operator(user):
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user,
                                 memberships__role=Membership.Role.LEAD).distinct()


def groups_for(user) -> QuerySet[SharingGroup]:
    """The sharing groups a caller may read: operators every one; a lead those its tenants'
    contracts are in; nobody else any (a group's figures are for its members' leads: in a
    group of two, a member who is not a lead would get the partner's costs by subtraction;
    the tenant page asks the same of is_lead)."""
    if is_operator(user):
        return SharingGroup.objects.all()
    return SharingGroup.objects.filter(
        members__contract__tenant__in=tenants_led_by(user)).distinct()


class Refused(PermissionDenied):
    """A write this caller may not make."""


def _lead(user, tenant_id) -> bool:
    return tenant_id is not None and is_lead(user, tenant_id)


# action: (who may, as a test of the user and the tenant's id; why the others may not)
WRITES = {
    "ask-burst": (_lead, _("Only the tenant's leads ask for bursts.")),
    "cancel-burst": (lambda user, tenant_id: _lead(user, tenant_id)
                     or may(user, "loans.change_burstrequest"),
                     _("Only the tenant's leads and operators cancel burst requests.")),
    "decide-burst": (lambda user, _tenant_id: may(user, "loans.change_burstrequest"),
                     _("Only operators approve, reject, revoke or prioritise burst requests.")),
    "decide-recommendation": (_lead, _("Only the tenant's leads decide.")),
    "amend-contract": (lambda user, _tenant_id: may(user, "loans.add_amendment"),
                       _("Only operators change contracts.")),
    "set-overage-policy": (lambda user, tenant_id: _lead(user, tenant_id)
                           or may(user, "loans.add_overagepolicy"),
                           _("Only the tenant's leads and operators set the overage policy.")),
    "create-sharing-group": (lambda user, _tenant_id: may(user, "loans.add_sharinggroup"),
                             _("Only operators change sharing groups.")),
    "add-sharing-member": (lambda user, _tenant_id: may(user, "loans.add_sharingmember"),
                           _("Only operators change sharing groups.")),
    "remove-sharing-member": (lambda user, _tenant_id: may(user, "loans.change_sharingmember"),
                              _("Only operators change sharing groups.")),
}


def _operator(user, _tenant_id) -> bool:
    return is_operator(user)


def _lead_or_operator(user, tenant_id) -> bool:
    return is_operator(user) or _lead(user, tenant_id)


# What a caller may read beyond its own tenants' pages (tenants_for and contract_for_user
# answer which tenants): the same table shape as WRITES.
READS = {
    "operator-pages": (_operator, _("Only operators see this page.")),
    "use-admin": (_operator, _("Only operators use the admin.")),
    "browse-api": (_operator, _("Only operators browse the API in production.")),
    "read-meter-checks": (_operator, _("Only operators see the agents against Slurm.")),
    # a sharing group's members' figures (loans.access.groups_for says which groups)
    "read-group-figures": (_lead_or_operator, _("Only the tenant's leads and operators see "
                                                 "the sharing group's figures.")),
    "read-group-members": (_operator, _("Only operators see every member's figures.")),
    "ask-advice": (_lead_or_operator, _("Only the tenant's leads ask this.")),
    # a tenant's chat channels (None: the operators' own, for operators only)
    "manage-channels": (_lead_or_operator, _("Only the tenant's leads and operators change its "
                                             "chat channels.")),
    "read-audit": (_lead_or_operator, _("Only the tenant's leads and operators read its "
                                        "audit log.")),
}
RULES = {**WRITES, **READS}


def api_tokens_for(user) -> QuerySet:
    """The personal API tokens a caller may see and revoke: operators everyone's, everyone
    else their own."""
    tokens = ApiToken.objects.select_related("user").order_by("user__username", "name", "pk")
    if is_operator(user):
        return tokens
    return tokens.filter(user=user) if user.is_authenticated else tokens.none()


def channels_for(user) -> QuerySet[Channel]:
    """The chat channels a caller may see and remove: operators every one; a lead those of
    the tenants they lead; nobody else any."""
    if not user.is_authenticated:
        return Channel.objects.none()
    if is_operator(user):
        return Channel.objects.all()
    return Channel.objects.filter(tenant__in=tenants_led_by(user))


def allowed(user, action: str, tenant_id: int | None = None) -> bool:
    """Whether this user may do or read `action` (a key of WRITES or READS) for the tenant."""
    return RULES[action][0](user, tenant_id)


def require(user, action: str, tenant_id: int | None = None) -> None:
    """Nothing if this user may do `action` for the tenant; Refused, with why, otherwise."""
    if not allowed(user, action, tenant_id):
        raise Refused(RULES[action][1])
