"""Add forms filled from the query string only with values their fields can read.

Django's admin fills an add form from its query string (`?tenant=3`, as the project's links
to it do), unchecked. An autocomplete widget then queries with the value, so `?tenant=abc`
(or a number past the column's range) was a 500. Each such value now goes through its model
field's `clean` (for a relation, its target's: the key): one it refuses is left out, and the
form opens without it."""

from django.core.exceptions import FieldDoesNotExist, ValidationError


class ReadablePrefill:
    """Mixed into the project's model admins (core.admin_figures.FiguresAdmin)."""

    def get_changeform_initial_data(self, request) -> dict:
        initial = super().get_changeform_initial_data(request)
        for name, value in list(initial.items()):
            try:
                field = self.model._meta.get_field(name)
            except FieldDoesNotExist:
                continue  # not a model field: the admin that reads it checks it
            reader = field.target_field if field.is_relation else field
            try:
                if isinstance(value, list):  # many-to-many: Django splits it at commas
                    for item in value:
                        reader.clean(item, None)
                elif field.is_relation:
                    reader.clean(value, None)
                else:
                    initial[name] = reader.clean(value, None)
            except (ValidationError, ValueError, TypeError, OverflowError):
                del initial[name]
        return initial
