"""A small YAML writer for the subset the manifests use: mappings, lists, strings, numbers,
booleans and null (no PyYAML: not a dependency).

Strings are always written double-quoted with JSON's escapes, which YAML 1.2 reads the same way
(a JSON string is a YAML double-quoted scalar), so no value can turn into a number, a boolean or
a second document. Keys that are plain identifiers are written bare.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _key(key: str) -> str:
    return key if _PLAIN_KEY.match(key) and key.lower() not in _RESERVED else json.dumps(key)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        out = []
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{_key(k)}:")
                out += _lines(v, indent + 2) if isinstance(v, dict) else _lines(v, indent)
            elif isinstance(v, (dict, list)):
                out.append(f"{pad}{_key(k)}: {'{}' if isinstance(v, dict) else '[]'}")
            else:
                out.append(f"{pad}{_key(k)}: {_scalar(v)}")
        return out
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            sub = _lines(item, indent + 2)
            out.append(f"{pad}- {sub[0][indent + 2:]}")
            out += sub[1:]
        return out
    return [pad + _scalar(value)]


def dump(value: Any) -> str:
    """One YAML document.

    >>> print(dump({"a": [{"b": 1, "c": "x"}, "y"], "yes": True, "e": {}}), end="")
    a:
    - b: 1
      c: "x"
    - "y"
    "yes": true
    e: {}
    """
    return "\n".join(_lines(value, 0)) + "\n"


def dump_all(docs: list[Any]) -> str:
    """Several documents, each started by ``---``."""
    return "".join("---\n" + dump(d) for d in docs)
