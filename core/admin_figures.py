"""Numbers in the admin as the pages write them: 9,000.0 GPU-h, 11,200.00, 99.5%, a
multiplier of 1.5, not as stored (9000.000000, 1.0000, 1.500). Lists format their decimal
columns; forms show a decimal without the zeros its column pads it with (9000, not
9000.000000), which is still the exact value."""

from decimal import Decimal

from django import forms
from django.contrib import admin
from django.db import models

from core.admin_input import ReadableAutocomplete, ReadableInput

MONEY_WORDS = ("cost", "amount", "saving", "fee", "price", "rate")


def written(value: Decimal | None, name: str) -> str:
    """`value` of the decimal field `name` as the pages write it."""
    if value is None:
        return "-"
    if name == "completeness":
        return format(value, ".1%")
    if "gpu_hours" in name:
        return format(value, ",.1f")
    if any(word in name for word in MONEY_WORDS):
        # Money to the cent; a rate may carry more places, shown when it has them.
        places = max(2, -min(0, value.normalize().as_tuple().exponent))
        return format(value, f",.{places}f")
    return format(value.normalize(), ",f")


def plain(value) -> str:
    """A decimal as a form's input holds it: exact, without padding zeros or an exponent."""
    if isinstance(value, Decimal):
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "") else text
    return value


class PlainDecimalInput(forms.NumberInput):
    def format_value(self, value):
        return super().format_value(plain(value))


# And a URL typed without a scheme is read as https (Django 6's default, and what a webhook
# should use), not http.
DECIMAL_INPUTS = {models.DecimalField: {"widget": PlainDecimalInput},
                  models.URLField: {"assume_scheme": "https"}}


def _column(field: models.DecimalField):
    @admin.display(description=field.verbose_name, ordering=field.name)
    def column(row) -> str:
        return written(getattr(row, field.name), field.name)

    column.__name__ = field.name
    return column


class FiguresAdmin(ReadableInput, admin.ModelAdmin):
    """The project's model admins: decimal list columns and inputs written as above, and, on
    the pages of records nobody may change (statements, rollups), decimal fields written so
    too, with `shown_as` naming other fields' written forms ({"period_index": number}).

    Beneath the project's own overrides, add forms take from the query string only what their
    fields read (core.admin_input), so an override reads cleaned values; the admin site mixes
    the same into the admins of Django's own models."""

    formfield_overrides = DECIMAL_INPUTS
    shown_as: dict = {}

    def _decimals(self) -> dict:
        return {f.name: f for f in self.model._meta.concrete_fields
                if isinstance(f, models.DecimalField)}

    def get_list_display(self, request):
        decimals = self._decimals()
        return [_column(decimals[name]) if isinstance(name, str) and name in decimals else name
                for name in super().get_list_display(request)]

    def _shown(self) -> dict:
        """Each field's written form on a read-only page: one callable a field, kept, since
        the fields and the read-only fields must name the same ones."""
        if not hasattr(self, "_shown_cache"):
            shown = {name: _column(field) for name, field in self._decimals().items()}
            shown.update({name: getattr(self, method) for name, method in self.shown_as.items()})
            self._shown_cache = shown
        return self._shown_cache

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fields
        shown = self._shown()
        # Django lists the read-only fields after the form's, so the written forms came twice.
        return list(dict.fromkeys(shown.get(name, name) if isinstance(name, str) else name
                                  for name in fields))

    def get_readonly_fields(self, request, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return readonly
        return [*readonly, *self._shown().values()]


class FiguresInline(ReadableAutocomplete):
    """Mixed into the project's inlines: decimal inputs as FiguresAdmin writes them, and
    autocomplete widgets that look up only what their field reads (core.admin_input)."""

    formfield_overrides = DECIMAL_INPUTS
