"""What a rule is: metadata beside a pure check over facts documents.

A rule file holds one :class:`Rule`. Its ``check`` receives one facts document (``scope="node"``)
or the list of every node's facts documents (``scope="cluster"``) and returns findings. It never
reads the machine: everything it knows comes from the facts it declares in ``reads``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable


class Severity(str, Enum):
    """How bad a finding is, lowest first. ``--fail-on`` compares against this order."""

    INFO = "info"          #: make an implicit choice explicit
    WARNING = "warning"    #: lost bandwidth, or a fragile or ambiguous configuration
    ERROR = "error"        #: NCCL is likely to fail, hang or crash

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for error."""
        return list(Severity).index(self)

    @classmethod
    def parse(cls, text: str) -> Severity:
        """Read a severity name (case-insensitive)."""
        return cls(text.strip().lower())


@dataclass(frozen=True)
class Finding:
    """One thing a rule found on one node or across the cluster."""

    message: str                                       #: one line, specific to what was seen
    fix: str = ""                                      #: what to do; the rule's fix when empty
    env: dict[str, str] = field(default_factory=dict)  #: variables to set ({} = advice only)
    evidence: dict[str, Any] = field(default_factory=dict)  #: fact path -> value seen
    hosts: tuple[str, ...] = ()                        #: nodes concerned (cluster rules)
    severity: Severity | None = None                   #: overrides the rule's severity


@dataclass(frozen=True)
class Rule:
    """A rule: who it is, what it reads and sets, why (with a citation), and a pure check."""

    id: str                   #: kebab-case, first segment the section or "cluster"
    title: str                #: one line
    severity: Severity
    reads: tuple[str, ...]    #: fact paths "<section>.<key>..."; missing -> skipped, with why
    sets: tuple[str, ...]     #: environment variables it may recommend (may be empty)
    why: str                  #: the rationale, restating NCCL's docs or source
    docs: str                 #: the citation: an NCCL docs URL or a source file and function
    fix: str                  #: what to do, in general
    check: Callable[..., list[Finding]]
    scope: str = "node"       #: "node": one facts document; "cluster": the list of them
    #: only matters when other nodes connect: the engine passes its findings through
    #: rules.common.gate_peers (one node: INFO at most; unknown: WARNING at most), which also
    #: reads common.PEER_READS
    peers: bool = False


def section(facts: dict[str, Any], name: str) -> Any:
    """The ``data`` of a section whose status is ok, else None."""
    sec = (facts.get("sections") or {}).get(name) or {}
    return sec.get("data") if sec.get("status") == "ok" else None


def fact(facts: dict[str, Any], path: str, default: Any = None) -> Any:
    """Follow a dotted fact path (``"limits.shm.size_bytes"``) into ok sections.

    >>> doc = {"sections": {"limits": {"status": "ok", "data": {"shm": {"size_bytes": 64}}}}}
    >>> fact(doc, "limits.shm.size_bytes"), fact(doc, "limits.memlock", "?")
    (64, '?')
    """
    name, _, rest = path.partition(".")
    node = section(facts, name)
    for key in rest.split(".") if rest else ():
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return default if node is None else node


def hostname(facts: dict[str, Any]) -> str:
    """The node's name as recorded in its facts."""
    return str(facts.get("hostname") or "?")


def absent(facts: dict[str, Any], name: str) -> bool:
    """Whether section ``name`` reports its subsystem absent (status ``unavailable``).

    Absence is a fact ("this node has no RDMA device"), unlike a section that was not collected
    or whose probe failed. Rules that read such a section declare the read optional (``"ib.devices?"``).

    >>> absent({"sections": {"ib": {"status": "unavailable"}}}, "ib"), absent({"sections": {}}, "ib")
    (True, False)
    """
    return ((facts.get("sections") or {}).get(name) or {}).get("status") == "unavailable"


def version_tuple(text: Any) -> tuple[int, ...] | None:
    """A dotted version as a tuple of ints, for comparisons; None when there is none.

    >>> version_tuple("2.21.5"), version_tuple("535.129.03"), version_tuple("12.2"), version_tuple(None)
    ((2, 21, 5), (535, 129, 3), (12, 2), None)
    >>> version_tuple("2.21.5+cuda12.2"), version_tuple("v2")
    ((2, 21, 5), None)
    """
    if not isinstance(text, str):
        return None
    parts = []
    for piece in text.strip().split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
        if digits.end() < len(piece):  # "5+cuda12": the version ends here
            break
    return tuple(parts) or None
