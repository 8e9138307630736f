"""What the admin's forms do with a value their field cannot read: refuse it as a form error,
never a 500.

Django's admin fills an add form from its query string (`?tenant=3`, as the project's links to
it do) unchecked, and its autocomplete widgets query the database with the value they hold,
whether it came from the query string or from a submitted form that is shown again with its
errors: `?tenant=abc`, or a posted user of `abc` or of a number past the column's range, was a
500. Here each prefill goes through its model field's `clean` (for a relation, its key's) and
is left out when refused, and the autocomplete widget looks up only the keys its field reads;
the form field itself still refuses the value with its message."""

from django import forms
from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import FieldDoesNotExist, ValidationError

UNREADABLE = (ValidationError, ValueError, TypeError, OverflowError)


def _reads(field, value) -> bool:
    try:
        field.clean(value, None)
    except UNREADABLE:
        return False
    return True


class ReadableAutocompleteSelect(AutocompleteSelect):
    """Django's autocomplete select, looking up only the keys its field can read."""

    def optgroups(self, name, value, attr=None):
        key = self.field.target_field
        return super().optgroups(name, [v for v in value if _reads(key, v)], attr)


class ReadableModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Django's, refusing a key its field cannot read before it queries with it (a group's
    permission 99999999999999999999 overflowed SQLite's integer: a 500)."""

    def _check_values(self, value):
        meta = self.queryset.model._meta
        key = meta.get_field(self.to_field_name) if self.to_field_name else meta.pk
        for item in value:
            if not _reads(key, item):
                raise ValidationError(self.error_messages["invalid_pk_value"],
                                      code="invalid_pk_value", params={"pk": str(item)[:40]})
        return super()._check_values(value)


class ReadableAutocomplete:
    """Relations' widgets and fields that refuse what their key cannot read: in every model
    admin (ReadableInput) and the project's inlines (core.admin_figures.FiguresInline)."""

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        kwargs.setdefault("form_class", ReadableModelMultipleChoiceField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):
            kwargs["widget"] = ReadableAutocompleteSelect(db_field, self.admin_site,
                                                          using=kwargs.get("using"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadableInput(ReadableAutocomplete):
    """Mixed into every model admin of the site (config.admin.GpuLoansAdminSite.register),
    Django's own (users, groups) included."""

    def get_changeform_initial_data(self, request) -> dict:
        initial = super().get_changeform_initial_data(request)
        for name, value in list(initial.items()):
            try:
                field = self.model._meta.get_field(name)
            except FieldDoesNotExist:
                continue  # not a model field: the admin that reads it checks it
            if not field.is_relation:
                try:
                    initial[name] = field.clean(value, None)
                except UNREADABLE:
                    del initial[name]
                continue
            values = value if isinstance(value, list) else [value]  # many-to-many: split at ","
            if not all(_reads(field.target_field, item) for item in values):
                del initial[name]
        return initial
