"""JSON Schema (draft 2020-12) of the tune document (``ncclcheck/tune``, schema_version 1).

Self-contained: no reference to other documents' schemas. Unknown keys are allowed (readers
ignore them, as :mod:`ncclcheck.schema` says); the keys below are required with these types.
``python -c 'import json; from ncclcheck.tune.schema import SCHEMA; print(json.dumps(SCHEMA))'``
prints it for a pipeline's own validator.
"""

from __future__ import annotations

from typing import Any

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_STR_OR_NULL = {"type": ["string", "null"]}
_ENV = {"type": "object", "additionalProperties": {"type": "string"}}

RUN: dict[str, Any] = {
    "type": "object",
    "required": ["round", "position", "peak_busbw_gbps", "avg_busbw_gbps", "wall_s", "error"],
    "properties": {
        "round": {"type": "integer", "minimum": 1},
        "position": {"type": "integer", "minimum": 1},
        "peak_busbw_gbps": _NUM_OR_NULL, "avg_busbw_gbps": _NUM_OR_NULL,
        "wall_s": _NUM, "error": _STR_OR_NULL,
        "interfaces": {"type": "array", "items": {"type": "string"}},
        "network": _STR_OR_NULL, "backend": _STR_OR_NULL,
    },
}

CANDIDATE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "label", "stage", "env", "sources", "measure", "not_measured", "runs",
                 "figures", "spread", "vs_baseline", "stopped"],
    "properties": {
        "id": {"type": "string"}, "label": {"type": "string"},
        "stage": {"type": "integer", "minimum": 1}, "env": _ENV,
        "sources": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "measure": {"type": "boolean"}, "not_measured": _STR_OR_NULL,
        "runs": {"type": "array", "items": RUN},
        "figures": {"type": "array", "items": _NUM},
        "spread": {"oneOf": [{"type": "null"}, {
            "type": "object", "required": ["median_gbps", "min_gbps", "max_gbps", "repeats"],
            "properties": {"median_gbps": _NUM, "min_gbps": _NUM, "max_gbps": _NUM,
                           "repeats": {"type": "integer", "minimum": 1}}}]},
        "vs_baseline": _NUM_OR_NULL, "stopped": _STR_OR_NULL,
    },
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://ncclcheck.invalid/schemas/tune-1.json",
    "title": "ncclcheck tune document",
    "type": "object",
    "required": ["schema", "schema_version", "ncclcheck_version", "created_at", "hosts",
                 "backend", "transport", "settings", "candidates", "rounds", "winner", "env",
                 "ties", "findings", "verify", "budget"],
    "properties": {
        "schema": {"const": "ncclcheck/tune"},
        "schema_version": {"type": "integer", "minimum": 1},
        "ncclcheck_version": {"type": "string"},
        "created_at": {"type": "string"},
        "hosts": {"type": "array", "items": {"type": "string"}},
        "backend": {"enum": ["nccl", "gloo"]},
        "transport": {"enum": ["Socket", "IB", "plugin"]},
        "settings": {"type": "object",
                     "required": ["op", "repeats", "budget_s", "early_stop_rule",
                                  "significance_rule", "metric"],
                     "properties": {"repeats": {"type": "integer", "minimum": 2},
                                    "budget_s": _NUM}},
        "candidates": {"type": "array", "items": CANDIDATE, "minItems": 1},
        "rounds": {"type": "array", "items": {
            "type": "object", "required": ["round", "order"],
            "properties": {"round": {"type": "integer", "minimum": 1},
                           "order": {"type": "array", "items": {"type": "string"}}}}},
        "winner": {"type": "object", "required": ["id", "label", "env", "significant", "why"],
                   "properties": {"id": {"type": "string"}, "env": _ENV,
                                  "significant": {"type": "boolean"}, "why": {"type": "string"}}},
        "env": _ENV,
        "ties": {"type": "array", "items": {"type": "object"}},
        "findings": {"type": "array", "items": {"type": "object"}},
        "verify": {"type": ["object", "null"],
                   "properties": {"ok": {"type": "boolean"},
                                  "problems": {"type": "array", "items": {"type": "string"}}}},
        "budget": {"type": "object", "required": ["limit_s", "used_s", "stopped"],
                   "properties": {"limit_s": _NUM, "used_s": _NUM, "stopped": _STR_OR_NULL}},
    },
}
