"""The floor in the admin: the intervals gpuloans itself held a contract (its overage policy's
hold or a spent budget), which the measure counts nothing in; kept by the job that notes them,
read here."""

from django.contrib import admin

from core.admin import ReadOnlyAdmin
from loans.models import ContractHold


@admin.register(ContractHold)
class ContractHoldAdmin(ReadOnlyAdmin):
    list_display = ["contract", "reason", "since", "until"]
    list_filter = ["reason", "contract__tenant"]
    search_fields = ["contract__tenant__slug", "contract__tenant__name"]
    list_select_related = ["contract__tenant", "contract__plan"]
    date_hierarchy = "since"
