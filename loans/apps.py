from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LoansConfig(AppConfig):
    name = "loans"
    verbose_name = _("Loans")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from loans.api import token_scheme  # noqa: F401 - registers the OpenAPI auth extension

        post_migrate.connect(grant_operators, dispatch_uid="loans-grant-operators")


OPERATOR_APPS = ("loans", "metering")


def grant_operators(sender, app_config=None, using="default", **kwargs) -> None:
    """After each migrate: the operators group holds every permission of the product's apps,
    so making someone an operator is adding them to one group (in the admin or with
    `create_operator`). Runs after Django has created the permissions, whose handler the
    auth app connected first."""
    if app_config is None or app_config.label not in OPERATOR_APPS:
        return
    from django.contrib.auth.models import Group, Permission

    from loans.access import OPERATORS

    group, _created = Group.objects.using(using).get_or_create(name=OPERATORS)
    group.permissions.add(*Permission.objects.using(using).filter(
        content_type__app_label=app_config.label))
