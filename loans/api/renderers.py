"""CSV renderers of the API: a table ({"columns", "rows"}) as a spreadsheet reads it, written by
the exports' one CSV writer (loans.services.exports), and the usage API's rows (`?format=csv`,
or `Accept: text/csv`). Refusals stay JSON (each view's finalize_response)."""

from rest_framework.renderers import BaseRenderer

from loans.services import exports


class TableCSVRenderer(BaseRenderer):
    """Rows under a header (`data` is {"columns", "rows"}); anything else renders empty."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict) and "columns" in data:
            return exports.csv_text(data).encode()
        return b""


class UsageCSVRenderer(TableCSVRenderer):
    COLUMNS = ("start", "allocated_gpu_hours", "busy_gpu_hours", "peak_gpus", "samples")

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return super().render({"columns": self.COLUMNS, "rows": [
            [row[name] for name in self.COLUMNS] for row in data["rows"]]})


class PDFRenderer(BaseRenderer):
    """A PDF the view has rendered already (loans.services.exports.pdf): `?format=pdf` or
    `Accept: application/pdf`."""

    media_type = "application/pdf"
    format = "pdf"
    charset = None
    render_style = "binary"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return data if isinstance(data, bytes) else b""
