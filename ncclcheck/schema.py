"""Every JSON document ncclcheck writes: names, versions, load and dump, atomic writes.

Each document has ``"schema": "ncclcheck/<kind>"`` and an integer ``schema_version``. Adding keys
keeps the version; renaming, removing or changing the meaning of a key bumps it. Readers ignore
unknown keys, and :func:`load` refuses a newer version with a message that says to upgrade.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from ncclcheck import __version__
from ncclcheck.errors import BadInput
from ncclcheck.outfile import write_atomic  # noqa: F401  (re-exported: schema.write_atomic)

#: schema name -> the newest version this ncclcheck reads and writes.
SCHEMAS: dict[str, int] = {
    "ncclcheck/facts": 1,
    "ncclcheck/cluster": 1,
    "ncclcheck/bench": 1,
    "ncclcheck/recommendation": 1,
    "ncclcheck/diagnosis": 1,
    "ncclcheck/report": 1,
}


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


def check(doc: Any, source: str = "document", expect: tuple[str, ...] = ()) -> dict[str, Any]:
    """Validate a parsed document's envelope; raise :class:`BadInput` naming ``source``.

    >>> check({"schema": "ncclcheck/facts", "schema_version": 1})["schema"]
    'ncclcheck/facts'
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
    return doc


def loads(text: str, source: str = "document", expect: tuple[str, ...] = ()) -> dict[str, Any]:
    """Parse and check a document from text."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{source}: not valid JSON ({exc})") from None
    return check(doc, source, expect)


def load(path: str | Path, expect: tuple[str, ...] = ()) -> dict[str, Any]:
    """Read and check a document from a file; every failure is one :class:`BadInput` line."""
    from ncclcheck.infile import read_text

    text = read_text(path)
    return loads(text, str(path), expect)


def dumps(doc: dict[str, Any]) -> str:
    """Stable JSON text: sorted keys, two-space indent, trailing newline (diffs cleanly)."""
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"


def dump(doc: dict[str, Any], path: str | Path) -> None:
    """Write a document atomically as stable JSON."""
    write_atomic(path, dumps(doc))
