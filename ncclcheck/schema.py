"""Every JSON document ncclcheck writes: names, versions, load and dump, atomic writes.

Each document has ``"schema": "ncclcheck/<kind>"`` and an integer ``schema_version``. Adding keys
keeps the version; renaming, removing or changing the meaning of a key bumps it. Readers ignore
unknown keys, and :func:`load` refuses a newer version with a message that says to upgrade.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ncclcheck import __version__
from ncclcheck.errors import BadInput, NcclcheckError

#: schema name -> the newest version this ncclcheck reads and writes.
SCHEMAS: dict[str, int] = {
    "ncclcheck/facts": 1,
    "ncclcheck/cluster": 1,
    "ncclcheck/bench": 1,
    "ncclcheck/recommendation": 1,
    "ncclcheck/diagnosis": 1,
    "ncclcheck/report": 1,
    "ncclcheck/pairwise": 1,
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
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BadInput(f"{path}: cannot read ({reason})") from None
    return loads(text, str(path), expect)


def dumps(doc: dict[str, Any]) -> str:
    """Stable JSON text: sorted keys, two-space indent, trailing newline (diffs cleanly)."""
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    The text goes to a temporary file in the same directory, is flushed and fsynced, then renamed
    over the target. On any failure the temporary file is removed and the target is untouched.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise BadInput(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, (IsADirectoryError, NotADirectoryError, PermissionError)):
            raise BadInput(f"{path}: cannot write ({exc.strerror or exc})") from None
        if isinstance(exc, OSError):
            raise NcclcheckError(f"{path}: write failed ({exc.strerror or exc}); "
                                 "the previous file, if any, is unchanged") from None
        raise


def dump(doc: dict[str, Any], path: str | Path) -> None:
    """Write a document atomically as stable JSON."""
    write_atomic(path, dumps(doc))
