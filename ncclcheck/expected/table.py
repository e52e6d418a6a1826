"""The table of expected all_reduce busbw by hardware class (``table.json``, shipped as data).

Each class: ``id``, ``title``, ``kind`` (nvlink, pcie, ib, roce, efa, gcp, tcp), ``busbw_gbps``
``[low, high]`` (GB/s = 1e9 bytes/s, nccl-tests' busbw), ``per`` (``node``; ``nic`` for IB and
RoCE, whose node range is the NIC count times it; ``relative`` ones are fractions of a shaped
rate), ``collectives`` and ``min_bytes`` (what the range holds for, also said in ``holds_for``),
and ``sources``: public URLs, each with what it says. An entry without a source is not shipped:
:func:`problems` is empty for the shipped table (``tests/expected``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("table.json")


@lru_cache(maxsize=1)
def classes() -> tuple[dict[str, Any], ...]:
    """Every class of the shipped table, in its order."""
    return tuple(json.loads(TABLE.read_text(encoding="utf-8"))["classes"])


def by_id(class_id: str) -> dict[str, Any]:
    """One class by its id (KeyError when there is none)."""
    for entry in classes():
        if entry["id"] == class_id:
            return entry
    raise KeyError(class_id)


def problems(entries: Any) -> list[str]:
    """What makes entries unfit to ship: no https source, a bad range, no collective.

    >>> problems([{"id": "x", "busbw_gbps": [2, 1], "collectives": [], "sources": []}])
    ['x: no source with an https URL', 'x: range [2, 1] is not low < high', 'x: no collective']
    """
    out = []
    for e in entries:
        name = e.get("id", "?")
        if not any(str(s.get("url", "")).startswith("https://") and s.get("says")
                   for s in e.get("sources") or []):
            out.append(f"{name}: no source with an https URL")
        low, high = (e.get("busbw_gbps") or [None, None])[:2]
        if not (isinstance(low, (int, float)) and isinstance(high, (int, float)) and 0 < low < high):
            out.append(f"{name}: range {e.get('busbw_gbps')} is not low < high")
        if not e.get("collectives"):
            out.append(f"{name}: no collective")
    return out


def node_range(entry: dict[str, Any], nics: int | None = None,
               rate_gbps: float | None = None) -> tuple[float, float] | None:
    """The class's busbw range for one node: per-NIC ranges times ``nics``, relative ones
    times ``rate_gbps``; None when the count or rate it needs is missing.

    >>> node_range({"per": "nic", "busbw_gbps": [44, 49]}, nics=8)
    (352.0, 392.0)
    >>> node_range({"per": "node", "relative": True, "busbw_gbps": [0.5, 1.0]}, rate_gbps=0.025)
    (0.0125, 0.025)
    """
    low, high = entry["busbw_gbps"]
    if entry.get("relative"):
        return (low * rate_gbps, high * rate_gbps) if rate_gbps else None
    if entry.get("per") == "nic":
        return (float(low * nics), float(high * nics)) if nics else None
    return float(low), float(high)


def source_urls(entry: dict[str, Any]) -> list[str]:
    """The URLs of a class's sources."""
    return [s["url"] for s in entry.get("sources") or []]


def select(ids: Any = ()) -> list[dict[str, Any]]:
    """The classes named (all when none); :class:`~ncclcheck.errors.BadInput` for an unknown id.

    >>> [e["id"] for e in select(["ib-ndr"])]
    ['ib-ndr']
    """
    from ncclcheck.errors import BadInput

    known = {e["id"]: e for e in classes()}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise BadInput(f"unknown class {unknown[0]!r} (ncclcheck expected lists them: "
                       f"{', '.join(known)})")
    return [known[i] for i in ids] if ids else list(classes())
