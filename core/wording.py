"""What happened, kept as a sentence's English template and its facts, and said in the reader's
language when it is shown. A job runs in no one's language: an alert, a recommendation or a
burst's note written as finished English would stay English on a Chinese page. So the job
stores the template (a msgid, marked with gettext_noop where it is written) and the numbers,
and the page, the admin and the API render it with gettext in the language of the request.

The English rendering is stored beside it (message, note): what e-mails, webhooks, searches
and rows written before this carry."""

from dataclasses import dataclass, field
from decimal import Decimal

from django.utils.translation import gettext


def _plain(value):
    """Facts go into JSON: decimals as floats (the templates format them), the rest as is."""
    if isinstance(value, Decimal):
        return float(value)
    return value


@dataclass(frozen=True)
class Wording:
    template: str
    facts: dict = field(default_factory=dict)

    @property
    def english(self) -> str:
        return self.template % self.facts if self.facts else self.template.replace("%%", "%")

    def stored(self) -> dict:
        return {"template": self.template, "facts": self.facts}


def worded(template: str, facts: dict | None = None) -> Wording:
    return Wording(template, {k: _plain(v) for k, v in (facts or {}).items()})


def said(stored: dict | None, fallback: str = "") -> str:
    """`stored` (Wording.stored()) in the active language; `fallback` where nothing was stored
    (rows from before, or words a person typed) or the template no longer fits its facts."""
    if not stored or "template" not in stored:
        return fallback
    facts = stored.get("facts") or {}
    try:
        text = gettext(stored["template"])
        return text % facts if facts else text.replace("%%", "%")
    except (KeyError, TypeError, ValueError):
        return fallback or stored["template"]
