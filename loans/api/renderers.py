"""CSV for the usage API (`?format=csv`, or `Accept: text/csv`): the rows a spreadsheet reads,
written by the exports' one CSV writer (loans.services.exports). Refusals stay JSON
(loans.api.views.TenantUsage.finalize_response)."""

from rest_framework.renderers import BaseRenderer

from loans.services import exports


class UsageCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"
    COLUMNS = ("start", "allocated_gpu_hours", "busy_gpu_hours", "peak_gpus", "samples")

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return exports.csv_text({"columns": self.COLUMNS, "rows": [
            [row[name] for name in self.COLUMNS] for row in data["rows"]]}).encode()
