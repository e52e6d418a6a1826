"""Read the documents report takes, recognised by ``schema``; a bad one is one line naming it."""

from __future__ import annotations

import os
from typing import Any, Iterable

from ncclcheck import schema
from ncclcheck.errors import BadInput

#: The documents ``report`` reads, by schema name.
KINDS = {
    "ncclcheck/facts": "facts",
    "ncclcheck/cluster": "cluster",
    "ncclcheck/bench": "bench",
    "ncclcheck/recommendation": "recommendation",
    "ncclcheck/diagnosis": "diagnosis",
    "ncclcheck/tune": "tune",
    "ncclcheck/pairwise": "pairwise",
}


def _need(doc: dict[str, Any], key: str, kind: type, source: str, optional: bool = True) -> None:
    """Refuse ``doc`` when ``key`` is not of type ``kind`` (or absent, unless optional)."""
    value = doc.get(key)
    if value is None and optional:
        return
    if not isinstance(value, kind):
        raise BadInput(f"{source}: {doc.get('schema') or 'document'} has no valid {key!r} "
                       f"({'a list' if kind is list else 'an object'} expected)")


def check_shape(doc: dict[str, Any], source: str) -> None:
    """Refuse a document whose main keys have the wrong type, naming the file.

    >>> check_shape({"schema": "ncclcheck/bench", "rows": {}}, "b.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: b.json: ncclcheck/bench has no valid 'rows' (a list expected)
    """
    kind = KINDS[doc["schema"]]
    if kind == "facts":
        _need(doc, "sections", dict, source)
        _need(doc, "findings", list, source)
    elif kind == "cluster":
        _need(doc, "nodes", list, source, optional=False)
        for i, node in enumerate(doc["nodes"]):
            schema.check(node, f"{source}: nodes[{i}]", expect=("ncclcheck/facts",),
                         validate=False)  # validated with the cluster document
            check_shape(node, f"{source}: nodes[{i}]")
    elif kind == "bench":
        _need(doc, "rows", list, source)
        _need(doc, "runs", list, source)
        for i, run in enumerate(doc.get("runs") or []):
            if not isinstance(run, dict) or not isinstance(run.get("bench"), dict):
                raise BadInput(f"{source}: runs[{i}] has no 'bench' object")
            _need(run["bench"], "rows", list, f"{source}: runs[{i}].bench")
    elif kind == "recommendation":
        _need(doc, "env", dict, source)
        _need(doc, "findings", list, source)
    elif kind == "diagnosis":
        _need(doc, "findings", list, source)
    elif kind == "tune":
        _need(doc, "candidates", list, source, optional=False)
        _need(doc, "env", dict, source)
    elif kind == "pairwise":
        from ncclcheck.pairwise.document import check_shape as pairwise_shape

        pairwise_shape(doc, source)


def load_documents(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Load and recognise each document by its ``schema``; one clear error naming a bad file.

    Returns ``[{"path", "name", "kind", "doc"}]`` in the order given.
    """
    out = []
    for path in paths:
        doc = schema.load(path)
        if doc["schema"] not in KINDS:
            raise BadInput(f"{path}: is {doc['schema']}; report reads "
                           f"{', '.join(KINDS)} documents")
        check_shape(doc, str(path))
        out.append({"path": str(path), "name": os.path.basename(str(path)),
                    "kind": KINDS[doc["schema"]], "doc": doc})
    if not out:
        raise BadInput("report: give at least one document")
    return out
