"""CSV for the usage API (`?format=csv`, or `Accept: text/csv`): the rows a spreadsheet reads.
Refusals stay JSON (loans.api.views.TenantUsage.finalize_response)."""

import io

from rest_framework.renderers import BaseRenderer

from core import spreadsheet


class UsageCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"
    COLUMNS = ("start", "allocated_gpu_hours", "busy_gpu_hours", "peak_gpus", "samples")

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        out = io.StringIO()
        writer = spreadsheet.writer(out)
        writer.writerow(self.COLUMNS)
        writer.writerows([row[name] for name in self.COLUMNS] for row in data["rows"])
        return out.getvalue().encode()
