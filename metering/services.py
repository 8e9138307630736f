"""Writes that span rows of metering's tables."""

from django.core.exceptions import ValidationError
from django.db import transaction

from loans.models import Tenant
from metering.models import Node


@transaction.atomic
def node_create(*, name: str, default_tenant: Tenant | None = None) -> tuple[Node, str]:
    """A new node and its token in clear (shown once, stored hashed)."""
    node = Node(name=name, default_tenant=default_tenant)
    node.full_clean()
    node.save()
    return node, node.issue_token()


def validation_message(error: ValidationError) -> str:
    """One line for a terminal: 'field: message; field: message'."""
    if hasattr(error, "message_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
            for field, messages in error.message_dict.items()
        )
    return " ".join(error.messages)
