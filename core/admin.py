"""Admin base classes both apps use: a read-only admin for rows that jobs write, a read-only
inline for rows kept for good under the record they belong to, and date hierarchies whose
parameters are checked before Django builds a date from them."""

from django.contrib import admin
from django.http import HttpResponseBadRequest
from django.utils.translation import gettext_lazy as _

from core.admin_figures import FiguresAdmin, FiguresInline
from core.bounds import FIRST_DAY, LAST_DAY, whole_number

DATE_PARTS = {"year": (FIRST_DAY.year, LAST_DAY.year), "month": (1, 12), "day": (1, 31)}


class DatedAdmin(FiguresAdmin):
    """A list with a date hierarchy whose `<field>__year` (month, day) is checked before
    Django builds a date from it: `?hour__year=99999999999` answers 400 naming the range,
    instead of an overflow and a 500."""

    def changelist_view(self, request, extra_context=None):
        if self.date_hierarchy:
            for part, (least, most) in DATE_PARTS.items():
                name = f"{self.date_hierarchy}__{part}"
                raw = request.GET.get(name)
                if raw is not None and whole_number(raw, least, most, digits=4) is None:
                    return HttpResponseBadRequest(
                        _("%(name)s must be a whole number from %(least)s to %(most)s.")
                        % {"name": name, "least": least, "most": most},
                        content_type="text/plain; charset=utf-8")
        return super().changelist_view(request, extra_context)


class ReadOnlyAdmin(DatedAdmin):
    """For records that jobs write and nobody edits: statements, rollups."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyInline(FiguresInline, admin.TabularInline):
    """Rows kept for good, shown under the record they belong to and never edited there:
    every field read-only, none added or deleted."""

    extra = 0
    can_delete = False

    def get_readonly_fields(self, request, obj=None):
        return self.fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False
