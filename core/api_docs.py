"""The API schema's operation summaries (`summary_of`, for config.openapi), and the schema in
the reader's language: `/api/docs/?lang=zh-hans` (the pages link it so in Chinese) asks
drf-spectacular for the schema under that language, and `translate` (the last
postprocessing hook) puts each summary, description and title through the message catalog.
Most of those texts are docstrings, which makemessages cannot read: `texts` collects them
from the English schema into core/api_texts.py (`python manage.py api_texts`), where it can,
and a test keeps that file current."""

import copy
import re

from django.utils import translation
from django.utils.translation import gettext

KEYS = ("summary", "description", "title")
ENUM = "\n\n* `"  # drf-spectacular appends a choice list to a description after this
CHOICES = "* `"  # ... or writes the list alone: the choices' labels translate themselves


def _head(text: str) -> tuple[str, str]:
    """A text without the choice list drf-spectacular appended, and that list."""
    at = text.find(ENUM)
    return (text, "") if at < 0 else (text[:at], text[at:])


def _walk(node, visit) -> None:
    """`visit(key, text)` replaces every summary, description and title under `node`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYS and isinstance(value, str):
                node[key] = visit(key, value)
            else:
                _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def _derived(schema: dict) -> list[tuple[str, dict]]:
    """Each operation whose summary was cut from its description (config.openapi), with its
    method."""
    return [(method, operation)
            for path, operations in schema.get("paths", {}).items()
            for method, operation in operations.items()
            if isinstance(operation, dict) and operation.get("summary")
            and operation["summary"] == summary_of(
                method, path, {"description": operation.get("description", "")})]


def texts(schema: dict) -> list[str]:
    """The texts a translator gives, from the schema generated in English: every summary,
    description and title, without choice lists (their labels translate themselves) and
    without the summaries cut from a description (translated, the description gives its
    own). Texts Django, DRF or a model's help text already give are listed too: a list
    that left them out would depend on the catalog it feeds."""
    cut = {id(operation) for _method, operation in _derived(schema)}
    found: set[str] = set()

    def gather(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in KEYS and isinstance(value, str):
                    head, _choices = _head(value)
                    if (head.strip() and not head.startswith(CHOICES)
                            and not (key == "summary" and id(node) in cut)):
                        found.add(head)
                else:
                    gather(value)
        elif isinstance(node, list):
            for value in node:
                gather(value)

    gather(schema)
    return sorted(found)


def _translated(text: str) -> str:
    head, choices = _head(text)
    return (gettext(head) if head.strip() else head) + choices


def translate(result: dict, generator, request, public) -> dict:
    """Every text of the schema in the active language; an operation's summary cut from its
    description is cut again from the translated one."""
    if (translation.get_language() or "en").startswith("en"):
        return result
    # A copy: other hooks put module-level dicts into the schema (the agent protocol's,
    # the refusals'), and translating them in place would leave the next English schema
    # in Chinese.
    result = copy.deepcopy(result)
    for _method, operation in _derived(result):
        operation["summary"] = first_sentence(_translated(operation.get("description", "")))
    _walk(result, lambda _key, value: _translated(value))
    return result


def first_sentence(text: str) -> str:
    """A Chinese description's first clause (up to its first full stop or semicolon), as a
    summary."""
    first = re.split(r"[。；\n]", text.strip(), maxsplit=1)[0].rstrip("。.")
    return first if len(first) <= 60 else first[:59] + "…"


def summary_of(method: str, path: str, operation: dict) -> str:
    """A one-line summary for an operation that names none: the first sentence of its
    description, else what the method does to the path (the docs list operations by it)."""
    first = operation.get("description", "").strip().split("\n\n")[0].replace("\n", " ")
    sentence = first.split(". ")[0].rstrip(".")
    if sentence:
        return sentence if len(sentence) <= 90 else sentence[:87].rstrip() + "..."
    verb = {"get": "Read", "post": "Create", "put": "Replace", "patch": "Change",
            "delete": "Delete"}.get(method, method.upper())
    return f"{verb} {path.removeprefix('/api/v1/').rstrip('/')}"
