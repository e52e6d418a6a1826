#!/usr/bin/env python3
"""Write ncclcheck/schemas/*.schema.json: the JSON Schema of every document ncclcheck writes.

The envelopes, findings and the keys readers index are written out here by hand (``HAND``);
the deep, probe-specific parts (each facts section's ``data``, bench rows, diagnosis ranks) are
inferred from real documents: the recorded hosts replayed, every fixture document, nccl-tests
imports and diagnoses of the recorded logs. Inference is strict on types (a key seen as a string
must stay a string), lenient on presence (no key it saw is required) and on unknown keys.

The shipped files are inferred from the fixtures AND every document the test suite writes, so
rewrite them from both (a rewrite from the fixtures alone would drop what only the suite's runs
show, and is refused unless asked for with ``--fixtures-only``)::

    NCCLCHECK_SCHEMA_SAMPLES=/tmp/s python -m pytest -q tests; python scripts/gen-schemas.py --samples /tmp/s
    python scripts/gen-schemas.py --check [--samples /tmp/s]   # exit 1 naming each sample document
                                                               # the shipped schemas reject
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "ncclcheck" / "schemas"

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: Whether every inferred value may also be null (the samples cannot show every failure).
NULLABLE = True
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
              list: "array", dict: "object"}
#: Keys that hold a map (names chosen by the data, not by ncclcheck) even when they look like
#: fixed field names: the value schema is shared by every key.
MAPS = {"env", "candidate_env", "conf_env", "hosts_map", "values", "evidence", "reasons",
        "differences", "other", "nccl", "torch_nccl", "interfaces", "devices", "nics", "chains"}


def infer(samples: list, key: str = "", nullable: bool = NULLABLE) -> dict:
    """A schema that every sample satisfies: types, object properties, array items.

    The items of a list of objects are objects, never null (unless a sample has a null item):
    readers index them (``gpus[i].get(...)``), and no writer leaves a hole in such a list."""
    types = []
    for s in samples:
        t = JSON_TYPES[type(s)]
        if t not in types:
            types.append(t)
    if "integer" in types:  # a count seen whole in the samples may be 1.5 in another document
        types.remove("integer")
        if "number" not in types:
            types.append("number")
    out: dict = {}
    if not types or types == ["null"]:  # never seen with a value: nothing known about it
        return out
    if nullable and "null" not in types:  # a probe that could not read a value writes null
        types.append("null")
    out["type"] = types[0] if len(types) == 1 else sorted(types)
    objects = [s for s in samples if isinstance(s, dict)]
    if objects:
        keys: list[str] = []
        for o in objects:
            keys += [k for k in o if k not in keys]
        if key in MAPS or any(not NAME.match(k) for k in keys):
            values = [v for o in objects for v in o.values()]
            if values:
                out["additionalProperties"] = infer(values)
        else:
            out["properties"] = {k: infer([o[k] for o in objects if k in o], k) for k in keys}
    arrays = [s for s in samples if isinstance(s, list)]
    items = [v for a in arrays for v in a]
    if items:
        out["items"] = infer(items, nullable=not all(isinstance(v, dict) for v in items))
    return out


def merge(inferred: dict, hand: dict) -> dict:
    """``inferred`` with ``hand`` laid over it, key by key (the hand-written part wins; an
    empty hand-written schema, ``{}``, means anything)."""
    out = dict(inferred)
    for key, value in hand.items():
        if isinstance(value, dict) and value and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def samples() -> dict[str, list]:
    """Real documents of each kind."""
    from ncclcheck import schema
    from ncclcheck.bench.importer import import_file
    from ncclcheck.cluster import load_sources
    from ncclcheck.diagnose import diagnose_files
    from ncclcheck.host.recorded import RecordedHost
    from ncclcheck.probe import collect_facts
    from ncclcheck.recommend.command import run_command

    docs: dict[str, list] = {k: [] for k in schema.SCHEMAS}

    def add(doc):
        if isinstance(doc, list):
            for d in doc:
                add(d)
        elif isinstance(doc, dict) and doc.get("schema") in docs:
            docs[doc["schema"]].append(doc)
            for node in doc.get("nodes") or [] if doc["schema"] == "ncclcheck/cluster" else []:
                add(node)

    for host in sorted(p for p in (FIX / "hosts").iterdir() if p.is_dir()):
        add(collect_facts(RecordedHost(host)))
    extra = sys.argv[sys.argv.index("--samples") + 1] if "--samples" in sys.argv else None
    for path in sorted(FIX.rglob("*.json")) + sorted(Path(extra).glob("*.json") if extra else []):
        try:
            add(json.loads(path.read_text()))
        except ValueError:
            pass
    for path in sorted((FIX / "nccl-tests").glob("*.txt")):
        try:
            add(import_file(path))
        except Exception:  # noqa: BLE001 - a fixture that needs --op
            pass
    for path in sorted((FIX / "logs").glob("*.log")):
        add(diagnose_files([str(path)]))
    for folder in sorted((FIX / "clusters").iterdir()):
        cluster = folder / "cluster.json"
        if cluster.exists() and "nodes" in json.loads(cluster.read_text()) \
                and json.loads(cluster.read_text()).get("schema"):
            add(load_sources([str(cluster)]))
            add(run_command([str(cluster)], [], "json")[0])
    return docs


def section_defs(facts: list[dict]) -> dict:
    """One ``definitions`` entry per facts section: its ``data`` inferred from the samples."""
    names = sorted({n for f in facts for n in (f.get("sections") or {})})
    out = {}
    for name in names:
        datas = [f["sections"][name].get("data") for f in facts
                 if isinstance(f["sections"].get(name), dict)]
        data = infer([d for d in datas if d is not None])
        data["type"] = ["null", "object"]
        out[f"section_{name}"] = {"allOf": [{"$ref": "#/definitions/section"}],
                                  "properties": {"data": data}}
    return out


def build(docs: dict[str, list]) -> dict[str, dict]:
    from schema_hand import HAND  # the hand-written parts, beside this file

    hand = copy.deepcopy(HAND)
    facts = hand["facts"]
    facts["definitions"].update(section_defs(docs["ncclcheck/facts"]))
    facts["properties"]["sections"]["properties"] = {
        k[len("section_"):]: {"$ref": f"#/definitions/{k}"} for k in facts["definitions"]
        if k.startswith("section_")}
    skip = {"schema", "schema_version", "ncclcheck_version", "created_at", "sections", "nodes",
            "runs"}
    for kind in hand:
        found = docs[f"ncclcheck/{kind}"]
        if kind == "bench":  # a --compare document's runs hold bench documents too
            found = found + [r["bench"] for d in found for r in d.get("runs") or []]
        props = hand[kind]["properties"]
        keys = sorted({k for d in found for k in d} - skip)
        for key in keys:
            inferred = infer([d[key] for d in found if key in d], key)
            if isinstance(inferred.get("type"), str):  # a part that a writer may leave out
                inferred["type"] = [inferred["type"], "null"]
            props[key] = merge(inferred, props.get(key, {}))
    run = hand["bench"]["properties"]["runs"]["items"]["properties"]["bench"]
    run["properties"] = {k: v for k, v in hand["bench"]["properties"].items()
                         if k not in ("runs", "best", "schema", "schema_version")}
    return hand


#: Compact layout: a value goes on one line when it fits in WIDTH characters, or when it is nested
#: DEPTH levels deep; above that, one key (or item) a line. The pretty-printed schemas ran to
#: 2,500 lines; this keeps every file under the house's 400 (tests/test_layering.py) while the top
#: of each document (sections, their fields) still reads and diffs one entry a line.
WIDTH = 100
DEPTH = 7


def compact(value: object, indent: str = "") -> str:
    """JSON for ``value``, one entry a line only near the top and where it would not fit.

    >>> print(compact({"b": [1, 2], "a": {"x": "y" * 96}}))
    {
     "a": {
      "x": "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
     },
     "b": [1, 2]
    }
    >>> compact({"a": {"b": 1}})
    '{"a": {"b": 1}}'
    """
    flat = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    if (len(indent) + len(flat) <= WIDTH or len(indent) >= DEPTH
            or not isinstance(value, (dict, list)) or not value):
        return flat
    inner = indent + " "
    if isinstance(value, dict):
        rows = [f"{inner}{json.dumps(k)}: {compact(value[k], inner)}" for k in sorted(value)]
        return "{\n" + ",\n".join(rows) + "\n" + indent + "}"
    rows = [inner + compact(v, inner) for v in value]
    return "[\n" + ",\n".join(rows) + "\n" + indent + "]"


def check_samples(docs: dict[str, list]) -> list[str]:
    """What the shipped schemas say of each sample document: one line per document rejected."""
    from ncclcheck.errors import BadInput
    from ncclcheck.schema import check

    rejected = []
    for kind, found in docs.items():
        for n, doc in enumerate(found):
            try:
                check(copy.deepcopy(doc), f"{kind} sample {n + 1}")
            except BadInput as exc:
                rejected.append(str(exc))
    return rejected


def main() -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    docs = samples()
    if "--check" in sys.argv:
        rejected = check_samples(docs)
        for line in rejected[:20]:
            print(line)
        if rejected:
            print(f"stale: the shipped schemas reject {len(rejected)} of "
                  f"{sum(map(len, docs.values()))} sample documents (rewrite them: see "
                  "scripts/gen-schemas.py's docstring)")
            return 1
        return 0
    if "--samples" not in sys.argv and "--fixtures-only" not in sys.argv:
        print("gen-schemas: give --samples DIR (the documents a test run kept, see the docstring); "
              "a rewrite from the fixtures alone (--fixtures-only) drops what only the suite shows",
              file=sys.stderr)
        return 2
    for kind, schema_doc in build(docs).items():
        OUT.mkdir(exist_ok=True)
        (OUT / f"{kind}.schema.json").write_text(compact(schema_doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
