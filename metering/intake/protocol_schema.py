"""Agent protocol v1 in the OpenAPI schema. The endpoint is a plain Django view (the hot path
skips DRF), so its contract is written here, from the protocol the README describes, for
agents and their authors."""

from metering.models.samples import MAX_INTERVAL_S, MIN_INTERVAL_S

SAMPLE = {
    "type": "object",
    "required": ["gpu_uuid", "ts", "interval_s", "allocated"],
    "properties": {
        "gpu_uuid": {"type": "string", "maxLength": 96, "example": "GPU-8f1c2d3e"},
        "gpu_index": {"type": "integer", "minimum": 0},
        "model": {"type": "string", "maxLength": 128, "example": "NVIDIA H100 80GB HBM3"},
        "ts": {"type": "string", "format": "date-time",
               "description": "RFC 3339 with Z or an offset; at most 5 minutes ahead, not older "
                              "than raw retention. (gpu_uuid, ts) is the idempotency key."},
        "interval_s": {"type": "integer", "minimum": MIN_INTERVAL_S, "maximum": MAX_INTERVAL_S},
        "allocated": {"type": "boolean"},
        "fraction": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1,
                     "default": 1},
        "util_pct": {"type": "number", "minimum": 0, "maximum": 100},
        "mem_used_mib": {"type": "integer", "minimum": 0},
        "mem_total_mib": {"type": "integer", "minimum": 0},
        "power_w": {"type": "number", "minimum": 0},
        "temp_c": {"type": "integer", "minimum": -100, "maximum": 250},
        "owner": {
            "type": "object",
            "properties": {key: {"type": "string", "maxLength": 253}
                           for key in ("namespace", "pod", "container", "user", "account", "job")},
        },
        "holder_unknown": {
            "type": "boolean", "default": False,
            "description": "The agent asks a scheduler who holds the device (kubelet, Slurm) "
                           "and could not read it in this interval: the readings are kept, "
                           "the interval counts as a gap in completeness. Part of a resent "
                           "sample's reading."},
    },
}
BATCH = {
    "type": "object",
    "required": ["node", "samples"],
    "properties": {
        "node": {"type": "string", "description": "Must be the name of the token's node."},
        "agent_version": {"type": "string", "maxLength": 64},
        "dropped_samples": {"type": "integer", "minimum": 0,
                            "description": "The agent's running total since it started."},
        "samples": {"type": "array", "items": {"$ref": "#/components/schemas/AgentSample"}},
    },
}
ACCEPTED = {
    "type": "object",
    "properties": {
        "accepted": {"type": "integer"},
        "duplicates": {"type": "integer"},
        "rejected": {"type": "array", "items": {
            "type": "object",
            "properties": {"index": {"type": "integer"}, "error": {"type": "string"}},
        }},
    },
}
ERROR = {"type": "object", "properties": {"error": {"type": "string"}}}


def _error(description: str) -> dict:
    schema = {"$ref": "#/components/schemas/AgentError"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def add_agent_protocol(result: dict, generator, request, public) -> dict:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update({"AgentSample": SAMPLE, "AgentBatch": BATCH, "AgentAccepted": ACCEPTED,
                    "AgentError": ERROR})
    result.setdefault("components", {}).setdefault("securitySchemes", {})["nodeToken"] = {
        "type": "http", "scheme": "bearer", "description": "The node's token (gpln_...)."}
    result.setdefault("paths", {})["/api/v1/samples"] = {"post": {
        "operationId": "agent_samples_create",
        "summary": "Post a batch of usage samples (agent protocol v1)",
        "tags": ["agent"],
        "security": [{"nodeToken": []}],
        "requestBody": {"required": True, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/AgentBatch"}}}},
        "responses": {
            "202": {"description": "Stored; rejected samples are listed by index with a reason.",
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/AgentAccepted"}}}},
            "400": _error("Malformed envelope."),
            "401": _error("Unknown or revoked token."),
            "403": _error("The token belongs to another node."),
            "413": _error("Body or batch over the limit."),
            "429": _error("Throttled; retry after Retry-After seconds."),
            "503": _error("Database unavailable; keep the batch and retry."),
        },
    }}
    return result
