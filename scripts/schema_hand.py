"""The hand-written parts of the document schemas (scripts/gen-schemas.py adds the inferred ones).

Written to JSON Schema draft-07 (what both jsonschema and fastjsonschema read). ``$ref`` between
documents (a cluster's nodes are facts documents) are ``#/definitions/<kind>``, which
:mod:`ncclcheck.schema` resolves by putting every file's definitions side by side.
"""

from __future__ import annotations

DRAFT = "http://json-schema.org/draft-07/schema#"
STR = {"type": "string"}
OPT_STR = {"type": ["string", "null"]}
STRS = {"type": "array", "items": STR}
NUM = {"type": "number"}
OPT_NUM = {"type": ["number", "null"]}
SEVERITY = {"enum": ["info", "warning", "error"]}
ENV = {"type": "object", "additionalProperties": STR}


def envelope(kind: str, title: str, props: dict, required: tuple = ()) -> dict:
    # Only what every reader needs is required: report renders a facts document without
    # hostname, recommend's loader asks for that itself (cluster.check_facts).
    """A document: ``schema`` const, integer ``schema_version``, and its own properties."""
    return {
        "$schema": DRAFT,
        "$id": f"https://ncclcheck.invalid/schemas/{kind}.schema.json",
        "title": title,
        "type": "object",
        "required": ["schema", "schema_version", *required],
        "properties": {
            "schema": {"const": f"ncclcheck/{kind}"},
            "schema_version": {"type": "integer", "minimum": 1},
            "ncclcheck_version": STR,
            "created_at": STR,
            **props,
        },
        "definitions": {},
    }


FINDING = {
    "type": "object",
    "required": ["rule", "severity", "message"],
    "properties": {
        "rule": STR, "severity": SEVERITY, "title": OPT_STR, "message": STR, "why": OPT_STR,
        "docs": OPT_STR, "fix": OPT_STR, "env": ENV, "hosts": STRS,
    },
}
SKIPPED = {"type": "object", "required": ["rule"],
           "properties": {"rule": STR, "reason": OPT_STR, "hosts": STRS}}
SECTION = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": STR,
        "data": {"type": ["object", "null"]},
        "errors": {"type": "array", "items": STR},
        "sources": {"type": "array", "items": STR},
        "duration_s": OPT_NUM,
    },
}
FAILED_NODE = {"type": "object", "properties": {"host": STR, "reason": STR}}
#: cluster.differences and recommendation.differences: fact -> what most nodes have, outliers.
DIFFERENCES = {"type": "object", "additionalProperties": {
    "type": "object",
    "properties": {"common": {}, "differs": {"type": "boolean"}, "outliers": STRS,
                   "values": {"type": "object", "additionalProperties": STRS}}}}

FACTS = envelope("facts", "ncclcheck facts: what one node's probe found", {
    "hostname": {"type": "string", "minLength": 1},
    "probed_as": OPT_STR,
    "collected_at": STR,
    "root": OPT_STR,
    "sections": {"type": "object", "additionalProperties": {"$ref": "#/definitions/section"}},
    "findings": {"type": "array", "items": {"$ref": "#/definitions/finding"}},
    "rule_errors": {"type": "array"},
    "skipped": {"type": "array", "items": {"$ref": "#/definitions/skipped"}},
})
FACTS["definitions"].update(finding=FINDING, skipped=SKIPPED, section=SECTION)

CLUSTER = envelope("cluster", "ncclcheck cluster: the facts of every node, and what differs", {
    "source": OPT_STR,
    "hosts": STRS,
    "nodes": {"type": "array", "items": {"$ref": "#/definitions/facts"}},
    "failed": {"type": "array", "items": FAILED_NODE},
    "differences": DIFFERENCES,
}, ("nodes",))

#: The expected-bandwidth verdict (ncclcheck/expected/verdict.py): every source a URL.
EXPECTED = {"type": ["object", "null"], "properties": {
    "class": OPT_STR, "title": OPT_STR,
    "range": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
    "ratio": OPT_NUM, "measured_gbps": OPT_NUM,
    "verdict": {"enum": ["normal", "low", "above the table", None]},
    "sources": {"type": "array", "items": {"type": "string", "pattern": "^https://"}},
    "limits": STRS, "missing": STRS, "notes": STRS}}

_RUN_COMMON = {
    "source": OPT_STR, "op": OPT_STR, "dtype": OPT_STR, "backend": OPT_STR,
    "nodes": STRS, "world_size": {"type": ["integer", "null"], "minimum": 0},
    "peak_busbw_gbps": OPT_NUM, "avg_busbw_gbps": OPT_NUM, "link_rate_gbps": OPT_NUM,
    "env": ENV, "candidate_env": ENV, "wrong_total": {"type": ["integer", "null"]},
    "expected": EXPECTED,
    "transport": {"type": ["object", "null"], "properties": {
        "per_rank": {"type": "array", "items": {"type": "object", "properties": {
            "hcas": {"type": ["array", "null"]}, "interfaces": {"type": ["array", "null"]}}}},
        "nccl_versions": {"type": "array", "items": STR}}},
}
BENCH = envelope("bench", "ncclcheck bench: one run, an nccl-tests import, or a --compare set", {
    **_RUN_COMMON,
    "runs": {"type": "array", "items": {
        "type": "object", "required": ["bench"],
        "properties": {"label": OPT_STR, "env_file": OPT_STR,
                       "bench": {"type": "object", "properties": dict(_RUN_COMMON)}}}},
    "best": {"type": ["object", "null"],
             "properties": {"label": OPT_STR, "peak_busbw_gbps": OPT_NUM}},
})

DIAGNOSIS = envelope("diagnosis", "ncclcheck diagnosis: what NCCL logs say went wrong", {
    "healthy": {"type": "boolean"},
    "findings": {"type": "array", "items": {
        "type": "object",
        "properties": {"id": STR, "severity": SEVERITY, "title": OPT_STR, "message": STR,
                       "cause": OPT_STR, "fix": OPT_STR, "docs": OPT_STR,
                       "count": {"type": "integer", "minimum": 0}, "hosts": STRS,
                       "ranks": {"type": "array"}}}},
    # issue 22: which rank held a failed job (Flight Recorder dumps, torchrun/srun lines)
    "culprits": {"type": "array", "items": {
        "type": "object", "required": ["rank", "kind", "evidence"],
        "properties": {"rank": {"type": "integer"},
                       "kind": {"enum": ["missing", "mismatch", "dead", "stuck", "straggler"]},
                       "host": OPT_STR, "local_rank": {"type": ["integer", "null"]},
                       "pid": {"type": ["integer", "null"]}, "gpu": {"type": ["integer", "null"]},
                       "pg": STR, "evidence": STRS}}},
    "first_desync": {"type": ["object", "null"], "required": ["pg", "seq", "op", "sizes"],
                     "properties": {"pg": STR, "seq": {"type": "integer"}, "op": STR,
                                    "sizes": STR, "dtypes": STR,
                                    "started": {"type": "array", "items": {"type": "integer"}}}},
    "progress": {"type": "array", "items": {"type": "object", "properties": {
        "rank": {"type": "integer"}, "pg": STR, "last_entered": {"type": "integer"},
        "last_completed": {"type": ["integer", "null"]}}}},
    "job": {"type": "object", "properties": {
        "class": {"enum": ["mismatch", "dead", "rank", "straggler", "network", "stream",
                           "none"]},
        "verdict": STR, "next_step": STR, "disagreements": STRS}},
})

RECOMMENDATION = envelope("recommendation", "ncclcheck recommendation: NCCL settings and reasons", {
    "env": ENV,
    "hosts": STRS,
    "sources": STRS,
    "findings": {"type": "array", "items": {"$ref": "#/definitions/finding"}},
    "skipped": {"type": "array", "items": {"$ref": "#/definitions/skipped"}},
    "reasons": {"type": "object", "additionalProperties": {
        "type": "array", "items": {"type": "object"}}},
    "errors": {"type": "array"},
    "failed": {"type": "array", "items": FAILED_NODE},
    "differences": DIFFERENCES,
    # issue 22: the settings that make the next hang explainable (the env text's last section)
    "explainable_hang": {"type": "object", "required": ["settings"], "properties": {
        "dump_dir": OPT_STR, "oldest_nccl": OPT_STR, "diagnose": OPT_STR,
        "settings": {"type": "array", "items": {
            "type": "object", "required": ["variable", "value", "since", "reason", "state"],
            "properties": {
                "variable": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"}, "value": STR,
                "since": STR, "reason": STR,
                "state": {"enum": ["set", "set by the rules", "needs --dump-dir",
                                   "needs NCCL >= 2.24"]}}}}}},
})

HAND = {"facts": FACTS, "cluster": CLUSTER, "bench": BENCH, "diagnosis": DIAGNOSIS,
        "recommendation": RECOMMENDATION}
