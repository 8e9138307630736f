"""A contract's statements as a PDF, for finance to file: each statement as the tenant page's
statement list shows it (the same rows, templates/loans/_statement.html: lines, sharing,
service credit, corrections, total), with the contract, the period and the closing time, in
the reader's language, rendered on the server by WeasyPrint (HTML and CSS to PDF through
Pango, no browser), Chinese in Debian's Noto CJK fonts. Every figure is a stored statement's
(loans.services.ledger.read); nothing is priced here.

WeasyPrint earns its place over a browser's print (no chromium on the web host, about 0.1 s
a statement) and over ReportLab (the page's own template and translations, not a second
layout in code)."""

from django.template.loader import render_to_string
from django.utils import timezone, translation

from loans.models import Contract
from loans.services.ledger.read import Ledger

try:  # Pango is a system library: without it the import fails, and so does only the PDF
    import weasyprint
except OSError as missing:  # pragma: no cover - the suite runs with Pango installed
    weasyprint = None
    WHY = str(missing)
else:
    WHY = ""

MEDIA_TYPE = "application/pdf"


class PDFUnavailable(RuntimeError):
    """The PDF renderer's system libraries are missing: the message says which to install."""


def filename(contract: Contract, period: int | None = None) -> str:
    scope = f"period-{period}" if period else "statements"
    return f"{contract.tenant.slug}-contract-{contract.pk}-{scope}.pdf"


def render(ledger: Ledger, language: str) -> bytes:
    """The ledger's statements (all of them, or the one period's it was cut to) as a PDF in
    `language`."""
    if weasyprint is None:
        raise PDFUnavailable(
            "PDF statements need Pango (Debian: apt-get install libpango-1.0-0 "
            f"libpangoft2-1.0-0 fonts-noto-cjk): {WHY}")
    contract = ledger.contract
    with translation.override(language):
        html = render_to_string("loans/statement_pdf.html", {
            "contract": contract, "tenant": contract.tenant, "zone": contract.zone,
            "statements": ledger.statements, "currency": contract.currency,
            "now": timezone.now(), "LANGUAGE_CODE": language})
    return weasyprint.HTML(string=html).write_pdf()
