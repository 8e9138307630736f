"""Who is an operator. A role, not a flag: an active staff user who may view every tenant, as
the operators group grants (loans.apps keeps it holding every permission of the product's
models; a superuser holds every permission). A staff user without it sees what a member sees,
as the admin shows such a user nothing. Permissions are named as strings, so nothing of an
app is imported here."""

OPERATORS = "operators"  # the group whose members run the fleet


def is_operator(user) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_staff
                and user.has_perm("loans.view_tenant"))


def may(user, permission: str) -> bool:
    """An operator holding this model permission ("loans.change_burstrequest")."""
    return is_operator(user) and user.has_perm(permission)
