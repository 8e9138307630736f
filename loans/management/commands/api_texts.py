"""Write core/api_texts.py: every text of the English API schema, for makemessages to read
(the schema's docstrings are not gettext calls). Run it after changing a view's docstring or
a schema text, then `makemessages` and translate; tests/test_api_docs_language.py fails until
the file is current."""

from pathlib import Path

from django.conf import settings
from django.utils import translation

from core.api_docs import texts
from core.audit import AuditedCommand

TARGET = Path(settings.BASE_DIR) / "core" / "api_texts.py"
HEADER = '''"""Every text of the API schema, for the translators: written by
`python manage.py api_texts` from the English schema; do not edit by hand. makemessages reads
these calls; the schema's hook (core.api_docs.translate) looks each text up in the
catalog."""

from django.utils.translation import gettext_noop as _

TEXTS = (
'''


def english_texts() -> list[str]:
    """Every text of the English schema, as the translate hook looks them up."""
    from drf_spectacular.generators import SchemaGenerator

    with translation.override("en"):
        return texts(SchemaGenerator().get_schema(request=None, public=True))


def rendered(found: list[str]) -> str:
    return HEADER + "".join(f"    _({text!r}),\n" for text in found) + ")\n"


class Command(AuditedCommand):
    help = "Write core/api_texts.py from the English API schema."

    def handle(self, *args, **options):
        found = english_texts()
        TARGET.write_text(rendered(found), encoding="utf-8")
        self.stdout.write(f"{TARGET.relative_to(settings.BASE_DIR)}: {len(found)} texts")
