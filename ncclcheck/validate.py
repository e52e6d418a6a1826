"""Validate documents against the JSON Schemas shipped in ``ncclcheck/schemas/``.

Each ``<kind>.schema.json`` is JSON Schema draft-07; a ``$ref`` to another document
(``#/definitions/facts`` in the cluster schema) resolves because :func:`definition` puts the
definitions of every file, and every document schema itself, side by side. ``ncclcheck schema
KIND`` prints that assembled, self-contained schema.

The validator is fastjsonschema, compiled on first use per kind and per process (see
scripts/bench-validate.py for the measured choice). Only readers pay for it: ``probe`` without
``--from`` never imports this module.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ncclcheck.errors import BadInput

FOLDER = Path(__file__).parent / "schemas"
KINDS = ("facts", "cluster", "bench", "diagnosis", "recommendation", "tune", "pairwise")


def kind_of(name: str) -> str:
    """``ncclcheck/facts`` -> ``facts``."""
    return name.rsplit("/", 1)[-1]


@lru_cache(maxsize=None)
def _file(kind: str) -> dict[str, Any]:
    return json.loads((FOLDER / f"{kind}.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _definition(kind: str) -> str:
    if kind not in KINDS:
        raise BadInput(f"no schema named {kind!r} (one of {', '.join(KINDS)})")
    out = copy.deepcopy(_file(kind))
    defs: dict[str, Any] = {}
    for other in KINDS:
        body = copy.deepcopy(_file(other))
        defs.update(body.pop("definitions", {}))
        for key in ("$schema", "$id"):
            body.pop(key, None)
        defs[other] = body
    out["definitions"] = defs
    return json.dumps(out, indent=1, sort_keys=True)


def definition(kind: str) -> dict[str, Any]:
    """The self-contained JSON Schema of a document kind (``facts``, ``cluster``, ...).

    >>> definition("cluster")["properties"]["nodes"]["items"]
    {'$ref': '#/definitions/facts'}
    """
    return json.loads(_definition(kind))


@lru_cache(maxsize=None)
def _validator(kind: str) -> Callable[[Any], Any]:
    import fastjsonschema

    return fastjsonschema.compile(definition(kind), use_formats=False)


_NAME = re.compile(r"^data(?=[.\[]|$)")


def _where(name: str) -> str:
    """fastjsonschema's ``data.sections.gpu`` as a JSON path, ``$.sections.gpu``."""
    return _NAME.sub("$", name or "data")


def validate(doc: Any, source: str = "document") -> Any:
    """Raise :class:`BadInput` naming ``source``, the JSON path and what was expected.

    >>> validate({"schema": "ncclcheck/facts", "schema_version": 1, "hostname": "n",
    ...           "sections": {"gpu": {"status": 5}}}, "f.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: f.json: $.sections.gpu.status must be string
    """
    import fastjsonschema

    kind = kind_of(str(doc.get("schema")))
    try:
        return _validator(kind)(doc)
    except fastjsonschema.JsonSchemaValueException as exc:
        name, message = exc.name or "data", exc.message or "is invalid"
        if message.startswith(name):
            message = _where(name) + message[len(name):]
        raise BadInput(f"{source}: {_printable(message)}") from None
    except RecursionError:
        raise BadInput(f"{source}: nested too deeply") from None


def _printable(text: str, limit: int = 300) -> str:
    from ncclcheck.textsafe import printable

    return printable(text[:limit] + ("..." if len(text) > limit else ""))
