"""Who is an operator. A role, not a flag or one permission: an active staff user in the
operators group (loans.apps keeps it holding every permission of the product's models), or a
superuser. Only operators read every tenant's statements, usage and the fleet page, only they
use the admin (config.admin), and only they write, in the admin as in the API, each write
needing the model's permission too. A staff user outside the group sees what a member sees,
whatever single permissions it holds. Permissions are named as strings, so nothing of an app
is imported here."""

OPERATORS = "operators"  # the group whose members run the fleet


def is_operator(user) -> bool:
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_gpuloans_operator", None)
    if cached is None:  # one query a request, however many times it is asked
        cached = user._gpuloans_operator = user.groups.filter(name=OPERATORS).exists()
    return cached


def may(user, permission: str) -> bool:
    """An operator holding this model permission ("loans.change_burstrequest")."""
    return is_operator(user) and user.has_perm(permission)
