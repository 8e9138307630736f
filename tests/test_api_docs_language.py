"""The API docs in the reader's language (issue 36, item 12): the schema asked for with
`?lang=zh-hans` carries every summary, description and title in Chinese, the pages link the
docs in theirs, and core/api_texts.py (what makemessages reads of the schema's docstrings)
stays current."""

import json
import re

from core.api_docs import texts
from loans.management.commands.api_texts import TARGET, english_texts, rendered

HAN = re.compile(r"[\u4e00-\u9fff]")


def english_left(schema: dict) -> list[tuple[str, str]]:
    """Every summary, description and title without a Chinese character (choice lists
    aside: their codes are the API's own words)."""
    left = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("summary", "description", "title") and isinstance(value, str):
                    head = value.split("\n\n* `")[0]
                    if head.strip() and not head.startswith("* `") and not HAN.search(head):
                        left.append((key, head))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return left


def schema(client, language: str = "") -> dict:
    query = f"?lang={language}" if language else ""
    answer = client.get(f"/api/schema/{query}", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200
    return json.loads(answer.content)


def test_the_schema_in_chinese_has_no_english_text(client, db):
    """Before, `?lang=zh-hans` changed only the field labels Django translates: the
    operations' summaries and descriptions, the refusals and the title stayed English."""
    chinese = schema(client, "zh-hans")
    assert english_left(chinese) == []
    assert chinese["info"]["title"] == "gpuloans API 文档"
    sharing = chinese["paths"]["/api/v1/sharing-groups/"]
    assert sharing["post"]["summary"] == "创建共享组"
    # A summary cut from a description is cut again from the translated description.
    assert chinese["paths"]["/api/v1/contracts/"]["get"]["summary"] == (
        "列出合同（可按租户或状态筛选）")
    assert chinese["paths"]["/api/v1/contracts/{id}/"]["get"]["responses"]["404"][
        "description"] == "对象不存在，或调用方无权查看。"
    assert chinese["paths"]["/api/v1/bursts/{id}/approve/"]["post"]["summary"] == (
        "批准排队中的申请（运营人员）")


def test_each_burst_operation_says_what_it_does(client, db):
    """Every burst operation carried the viewset's docstring, cut, as its summary."""
    paths = schema(client)["paths"]
    summaries = [operation["summary"] for path, operations in paths.items()
                 if path.startswith("/api/v1/bursts/") for operation in operations.values()]
    assert len(summaries) == 8 and len(set(summaries)) == 8


def test_no_two_operations_share_a_summary(client, db):
    """The operators' contracts, nodes and plans shared six generic summaries ("Operators:
    the list, a page at a time"), a node's token actions read "add one", and the tenants',
    re-attributions', amendments' and overage policy's operations each their resource's."""
    paths = schema(client)["paths"]
    seen: dict[str, list[str]] = {}
    for path, operations in paths.items():
        for method, operation in operations.items():
            seen.setdefault(operation["summary"], []).append(f"{method.upper()} {path}")
    assert {summary: where for summary, where in seen.items() if len(where) > 1} == {}
    assert paths["/api/v1/nodes/{id}/revoke-token/"]["post"]["summary"] == (
        "Revoke the node's token")


def test_the_schema_in_english_is_as_written(client, db):
    english = schema(client)
    assert english["info"]["title"] == "gpuloans API"
    assert english["paths"]["/api/v1/sharing-groups/"]["post"]["summary"] == (
        "Create a sharing group")
    assert english == schema(client, "en")


def test_the_schemas_texts_file_is_current():
    """A new or changed docstring fails here until `python manage.py api_texts` writes it
    into core/api_texts.py (and makemessages, and a translation, follow)."""
    assert TARGET.read_text(encoding="utf-8") == rendered(english_texts())


def test_the_collected_texts_leave_out_choice_lists_and_summaries_cut_from_descriptions():
    schema = {"paths": {"/x": {"get": {"description": "Reads x. More.", "summary": "Reads x",
                                       "parameters": [{"description": "Day or hour",
                                                       "title": "Kept"}]},
                               "post": {"description": "Writes x.", "summary": "Write"}}},
              "info": {"title": "T\n\n* `a` - a", "description": "* `b` - b"}}
    assert texts(schema) == ["Day or hour", "Kept", "Reads x. More.", "T", "Write",
                             "Writes x."]


def test_the_pages_link_the_docs_in_their_language(client, lead, contract):
    client.force_login(lead)
    english = client.get("/en/tenants/vision/").content.decode()
    assert 'href="/api/docs/" id="api-docs-link"' in english
    chinese = client.get("/zh-hans/tenants/vision/").content.decode()
    assert 'href="/api/docs/?lang=zh-hans" id="api-docs-link"' in chinese
    # The docs' start-up script asks for the schema in the docs' language.
    script = client.get("/api/docs/?lang=zh-hans&script=").content.decode()
    assert 'url: "/api/schema/?lang\\u003Dzh\\u002Dhans"' in script
