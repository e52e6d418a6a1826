"""Every JSON document ncclcheck writes: names, versions, load and dump, atomic writes.

Each document has ``"schema": "ncclcheck/<kind>"`` and an integer ``schema_version``. Adding keys
keeps the version; renaming, removing or changing the meaning of a key bumps it, and adds an entry
to :data:`UPGRADES` that turns the older document into the newer one, so that documents written
by an earlier ncclcheck still read. Readers ignore unknown keys, and :func:`load` refuses a newer
version with a message that says to upgrade.

Every document read is validated against its JSON Schema (:mod:`ncclcheck.validate`) before any
reader looks inside; NaN, infinity and integers beyond 64 bits are refused as not JSON, and
never written.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

from ncclcheck import __version__
from ncclcheck.errors import BadInput
from ncclcheck.textsafe import printable
from ncclcheck.outfile import write_atomic

#: schema name -> the newest version this ncclcheck reads and writes.
SCHEMAS: dict[str, int] = {
    "ncclcheck/facts": 1,
    "ncclcheck/cluster": 1,
    "ncclcheck/bench": 1,
    "ncclcheck/recommendation": 1,
    "ncclcheck/diagnosis": 1,
    "ncclcheck/report": 1,
    "ncclcheck/tune": 1,
    "ncclcheck/pairwise": 1,
}


#: (schema, version) -> a function turning such a document into one of version + 1.
UPGRADES: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 20 or abs(int(text)) >= 1 << 64:
        raise ValueError(f"integer {text[:20]}... is out of range")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The one JSON decoder for documents: no NaN, no infinity, no 200-digit integers.
DECODER = json.JSONDecoder(parse_float=_finite, parse_int=_bounded_int,
                           parse_constant=_no_constant)


def now_utc() -> str:
    """The current time as an ISO-8601 UTC string with a trailing Z."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def envelope(schema: str, **fields: Any) -> dict[str, Any]:
    """A new document of kind ``schema`` with its version and ncclcheck's version."""
    if schema not in SCHEMAS:
        raise ValueError(f"unknown schema {schema}")
    doc: dict[str, Any] = {"schema": schema, "schema_version": SCHEMAS[schema],
                           "ncclcheck_version": __version__}
    doc.update(fields)
    return doc


def check(doc: Any, source: str = "document", expect: tuple[str, ...] = (),
          validate: bool = True) -> dict[str, Any]:
    """Check a parsed document's envelope, upgrade an older version, validate it against its
    schema (unless ``validate`` is False: a part of a document already validated whole); raise
    :class:`BadInput` naming ``source``.

    >>> check({"schema": "ncclcheck/facts", "schema_version": 1, "hostname": "n1",
    ...        "sections": {}})["schema"]
    'ncclcheck/facts'
    >>> check({"schema": "ncclcheck/facts", "schema_version": 1, "sections": []}, "f.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: f.json: $.sections must be object
    >>> check({"schema": "ncclcheck/facts", "schema_version": 9}, "f.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: f.json: ncclcheck/facts schema_version 9 is newer than this ncclcheck reads (1); upgrade ncclcheck
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        raise BadInput(f"{source}: not an ncclcheck document (no 'schema' field)")
    name, version = doc["schema"], doc.get("schema_version")
    if name not in SCHEMAS:
        raise BadInput(f"{source}: unknown schema {name!r}")
    if expect and name not in expect:
        raise BadInput(f"{source}: is {name}, expected {' or '.join(expect)}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"{source}: {name} has no valid integer schema_version")
    if version > SCHEMAS[name]:
        raise BadInput(f"{source}: {name} schema_version {version} is newer than this ncclcheck "
                       f"reads ({SCHEMAS[name]}); upgrade ncclcheck")
    while version < SCHEMAS[name] and (name, version) in UPGRADES:
        doc = UPGRADES[(name, version)](doc)
        version = doc["schema_version"] = version + 1
    if validate and name != "ncclcheck/report":
        from ncclcheck.validate import validate as against_schema

        against_schema(doc, source)
    return doc


def loads(text: str, source: str = "document", expect: tuple[str, ...] = ()) -> dict[str, Any]:
    """Parse and check a document from text."""
    try:
        doc = DECODER.decode(text)
    except ValueError as exc:
        raise BadInput(f"{source}: not valid JSON ({printable(str(exc))[:200]})") from None
    except RecursionError:
        raise BadInput(f"{source}: not valid JSON (nested too deeply)") from None
    return check(doc, source, expect)


def load(path: str | Path, expect: tuple[str, ...] = ()) -> dict[str, Any]:
    """Read and check a document from a file; every failure is one :class:`BadInput` line."""
    from ncclcheck.infile import read_text

    text = read_text(path)
    return loads(text, str(path), expect)


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON has neither).

    >>> finite({"a": [1.0, float("nan")], "b": float("inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(doc: dict[str, Any]) -> str:
    """Stable JSON text: sorted keys, two-space indent, trailing newline (diffs cleanly).

    NaN and infinity are written as null. With ``NCCLCHECK_VALIDATE_WRITES=1`` (the test suite
    sets it) the document is validated against its schema first, so that no test writes one
    that a reader would refuse.
    """
    if os.environ.get("NCCLCHECK_VALIDATE_WRITES") and isinstance(doc, dict) \
            and doc.get("schema") in SCHEMAS and doc["schema"] != "ncclcheck/report":
        from ncclcheck.validate import validate

        validate(json.loads(json.dumps(finite(doc), default=str)), "document written")
    if os.environ.get("NCCLCHECK_SCHEMA_SAMPLES"):  # scripts/gen-schemas.py --samples DIR
        _keep_sample(doc, os.environ["NCCLCHECK_SCHEMA_SAMPLES"])
    try:
        text = json.dumps(doc, indent=2, sort_keys=True, default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(finite(doc), indent=2, sort_keys=True, default=str)
    return text + "\n"


def _keep_sample(doc: Any, folder: str) -> None:
    import tempfile

    if isinstance(doc, dict) and doc.get("schema") in SCHEMAS:
        fd, _ = tempfile.mkstemp(prefix=str(doc["schema"]).replace("/", "-") + ".",
                                 suffix=".json", dir=folder)
        with os.fdopen(fd, "w") as f:
            json.dump(finite(doc), f, default=str)


def dump(doc: dict[str, Any], path: str | Path) -> None:
    """Write a document atomically as stable JSON."""
    write_atomic(path, dumps(doc))


def split_documents(text: str, source: str) -> list[Any]:
    """Every JSON value in ``text``: one document, JSON lines, or documents back to back
    (``srun ... ncclcheck probe --json > facts.json`` with one task per node).

    >>> [d["n"] for d in split_documents('{"n": 1}\\n{"n": 2}{"n": 3}', "f")]
    [1, 2, 3]
    >>> split_documents("{", "f.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: f.json: not valid JSON at offset 0 (Expecting property name enclosed in double quotes)
    """
    decoder = DECODER
    docs, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            doc, end = decoder.raw_decode(text, pos)
        except ValueError as exc:
            raise BadInput(f"{source}: not valid JSON at offset {pos} "
                           f"({printable(getattr(exc, 'msg', exc))[:200]})") from None
        except RecursionError:
            raise BadInput(f"{source}: not valid JSON at offset {pos} (nested too deeply)") from None
        docs.append(doc)
        pos = end
    return docs
