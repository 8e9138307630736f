"""The refusals every DRF operation may answer, written into the OpenAPI schema: an integration
reading the schema learns what a 400, 401, 403, 404, 409 or 429 looks like (DRF's
{"detail": ...}, or a field -> messages object for a 400)."""

from core.api_docs import summary_of

DETAIL = {"type": "object", "properties": {"detail": {"type": "string"}},
          "required": ["detail"]}
INVALID = {"type": "object", "additionalProperties": True,
           "description": "For each field (or non_field_errors / detail), what is wrong."}
REFUSALS = {
    "401": ("Authentication credentials were missing or wrong.", "ApiDetail"),
    "403": ("This caller may not do this.", "ApiDetail"),
    "429": ("Throttled; retry after Retry-After seconds.", "ApiDetail"),
}


# What each operation of an operators' viewset does: without them every operation carried the
# viewset's own docstring (that deleting what history depends on answers 409), list included.
OPERATOR_DOC_START = "Operators read and write these"
OPERATOR_OPERATIONS = {
    ("get", False): "Operators: the list, a page at a time (limit and offset).",
    ("post", False): "Operators: add one; it is checked as the admin checks it.",
    ("get", True): "Operators: one, by its id.",
    ("put", True): "Operators: replace one; it is checked as the admin checks it.",
    ("patch", True): "Operators: change some fields of one; checked as the admin checks it.",
    ("delete", True): "Operators: delete one. One that history depends on (statements, samples, "
                      "amendments) is kept, and the answer is 409 with the reason.",
}


def _answer(description: str, schema: str) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


def add_error_responses(result: dict, generator, request, public) -> dict:
    result.setdefault("components", {}).setdefault("schemas", {}).update(
        {"ApiDetail": DETAIL, "ApiInvalid": INVALID})
    for path, operations in result.get("paths", {}).items():
        if path == "/api/v1/samples":
            continue  # agent protocol v1 documents its own (metering.intake.protocol_schema)
        for method, operation in operations.items():
            if operation.get("description", "").startswith(OPERATOR_DOC_START):
                operation["description"] = OPERATOR_OPERATIONS.get(
                    (method, path.rstrip("/").endswith("}")), operation["description"])
            operation.setdefault("summary", summary_of(method, path, operation))
            responses = operation.setdefault("responses", {})
            wanted = dict(REFUSALS)
            if operation.get("parameters") or operation.get("requestBody"):
                wanted["400"] = ("The request is not valid; the body says why.", "ApiInvalid")
            if "{" in path:
                wanted["404"] = ("No such object, or not one this caller may see.", "ApiDetail")
            if method == "post" and path.startswith("/api/v1/bursts/{"):
                wanted["409"] = ("The request's state does not allow this.", "ApiDetail")
            for status, (description, schema) in wanted.items():
                responses.setdefault(status, _answer(description, schema))
    return result
