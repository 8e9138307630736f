"""Every interface string has its Simplified Chinese translation, and the compiled catalogue
that ships is the one the sources say."""

import ast
import gettext
from pathlib import Path

CATALOGUE = Path(__file__).resolve().parent.parent / "locale" / "zh_Hans" / "LC_MESSAGES"


def po_entries(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) pairs of a .po file; plural forms give their first msgstr. A msgid
    with a context reads "context\x04msgid", as gettext keys it."""
    entries, current, field = [], {}, None
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if not line.strip():
            if "msgid" in current:
                key = current["msgid"]
                if "msgctxt" in current:
                    key = f"{current['msgctxt']}\x04{key}"
                entries.append((key, current.get("msgstr", "")))
            current, field = {}, None
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            current[field] += ast.literal_eval(line)
        else:
            keyword, _, literal = line.partition(" ")
            field = "msgstr" if keyword.startswith("msgstr") else keyword
            if field not in current:  # msgstr[1..] of plurals add nothing for zh_Hans
                current[field] = ast.literal_eval(literal)
    return [(msgid, msgstr) for msgid, msgstr in entries if msgid]


def compiled_text(compiled: gettext.GNUTranslations, key: str) -> str:
    context, _, msgid = key.rpartition("\x04")
    return compiled.pgettext(context, msgid) if context else compiled.gettext(msgid)


def test_every_message_is_translated():
    untranslated = [msgid for msgid, msgstr in po_entries(CATALOGUE / "django.po") if not msgstr]
    assert untranslated == []


def test_the_compiled_catalogue_matches_the_sources():
    with open(CATALOGUE / "django.mo", "rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    stale = [msgid for msgid, msgstr in po_entries(CATALOGUE / "django.po")
             if compiled_text(compiled, msgid) != msgstr]
    assert stale == [], "run: python manage.py compilemessages --ignore=.venv"
