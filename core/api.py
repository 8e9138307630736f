"""The API's base classes, shared by both apps: model validation on write, deletions that
history depends on refused with 409, and the operators' model permissions."""

from copy import copy

from django.core.exceptions import ValidationError as ModelValidationError
from django.db.models import ProtectedError
from django.utils.translation import gettext as _
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from core.roles import is_operator


class ModelCleanMixin:
    """Run the model's own validation (field validators, clean(), constraints) on the values
    the request would store, so the API refuses exactly what the admin refuses."""

    nested: tuple[str, ...] = ()

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        instance = copy(self.instance) if self.instance is not None else self.Meta.model()
        for name, value in attrs.items():
            if name not in self.nested:
                setattr(instance, name, value)
        try:
            instance.full_clean()
        except ModelValidationError as error:
            raise serializers.ValidationError(serializers.as_serializer_error(error)) from None
        return attrs


class ProtectedDestroyMixin:
    # Deleting what history depends on answers 409 with the reason, not a server error. (A
    # comment, not a docstring: the API docs would show it as every operation's description.)

    def destroy(self, request: Request, *args, **kwargs) -> Response:
        try:
            return super().destroy(request, *args, **kwargs)
        except ProtectedError as error:
            used_by = sorted({obj._meta.verbose_name_plural for obj in error.protected_objects})
            return Response(
                {"detail": _("In use by %(what)s; it cannot be deleted.")
                 % {"what": ", ".join(map(str, used_by))}},
                status=status.HTTP_409_CONFLICT,
            )


class OperatorPermissions(permissions.DjangoModelPermissions):
    """As the admin decides: an operator (core.roles.is_operator) holding the model
    permission the request needs; reading needs view. An action that changes a row (rotating
    a node's token) names the permission it needs in the view's `action_permissions`."""

    perms_map = {**permissions.DjangoModelPermissions.perms_map,
                 "GET": ["%(app_label)s.view_%(model_name)s"],
                 "HEAD": ["%(app_label)s.view_%(model_name)s"],
                 "OPTIONS": ["%(app_label)s.view_%(model_name)s"]}

    def has_permission(self, request, view) -> bool:
        if not is_operator(request.user):
            return False
        needed = getattr(view, "action_permissions", {}).get(getattr(view, "action", None))
        if needed:
            model = view.get_queryset().model._meta
            return request.user.has_perm(f"{model.app_label}.{needed}_{model.model_name}")
        return super().has_permission(request, view)


class OperatorViewSet(ProtectedDestroyMixin, viewsets.ModelViewSet):
    """Operators read and write these with the model permissions the admin asks for; deleting
    a row that history depends on answers 409."""

    permission_classes = [OperatorPermissions]
