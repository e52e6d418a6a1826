"""cluster-nccl-version-mismatch: nodes would run different NCCL versions.

Each node's version is the one its training job loads: the library torch loads
(``nccl.torch_loads``), else the one a program linked to ``libnccl.so.2`` gets
(``nccl.system_loads``), else the node's only version. Other rules use :func:`node_version`
and :func:`versions` to gate version-specific advice.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname, version_tuple
from ncclcheck.rules.common import mismatch


def node_version(facts: dict[str, Any]) -> str | None:
    """The NCCL version a job on this node loads, or None when the facts cannot tell.

    >>> doc = {"sections": {"nccl": {"status": "ok", "data": {"torch_loads": {"version": "2.21.5"},
    ...        "versions": ["2.18.3", "2.21.5"]}}}}
    >>> node_version(doc)
    '2.21.5'
    """
    for key in ("torch_loads", "system_loads"):
        choice = fact(facts, f"nccl.{key}") or {}
        if isinstance(choice, dict) and choice.get("version"):
            return str(choice["version"])
    found = [v for v in fact(facts, "nccl.versions", []) if v]
    return str(found[0]) if len(found) == 1 else None


def versions(nodes: list[dict[str, Any]]) -> dict[str, str | None]:
    """Host -> NCCL version (None when unknown)."""
    return {hostname(n): node_version(n) for n in nodes}


def oldest(nodes: list[dict[str, Any]]) -> tuple[tuple[int, ...] | None, str | None]:
    """The oldest known NCCL version across nodes, as a tuple and as text."""
    known = [(version_tuple(v), v) for v in versions(nodes).values() if v and version_tuple(v)]
    if not known:
        return None, None
    return min(known)


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when nodes load different NCCL versions (unknown versions are listed, not compared)."""
    return mismatch(nodes, node_version, "NCCL versions", "nccl.version",
                    "; ranks on different versions can fail at connect ('Mismatched NCCL "
                    "version') or disagree on defaults")


RULE = Rule(
    id="cluster-nccl-version-mismatch",
    title="Run one NCCL version on every node",
    severity=Severity.ERROR,
    reads=("nccl.versions", "nccl.torch_loads?", "nccl.system_loads?"),
    sets=(),
    why=("NCCL checks versions at init and fails with 'Mismatched NCCL version detected' "
         "(src/init.cc); even where it connects, defaults differ between releases (IB timeout, "
         "GID selection, protocols) and ranks must agree on them. torch wheels bundle their own "
         "NCCL, so two nodes with the same torch can still differ through LD_PRELOAD or a "
         "different wheel (NVIDIA/nccl#286)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html",
    fix="Install the same nvidia-nccl-cu12 (or libnccl2) version on every node; check with "
        "NCCL_DEBUG=VERSION.",
    check=check,
    scope="cluster",
)
