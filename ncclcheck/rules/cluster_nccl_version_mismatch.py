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


#: 'Mismatched NCCL version detected' (src/init.cc, v2.23.4-1 on): an error at init.
CHECKED_SINCE = (2, 23)


def normalised(version: str | None) -> str | None:
    """The comparable part of a version: ``2.21.5+cuda12.2`` and ``2.21.5`` are one release.

    >>> normalised("2.21.5+cuda12.2"), normalised("2.21.5"), normalised(None)
    ('2.21.5', '2.21.5', None)
    """
    parts = version_tuple(version)
    return ".".join(map(str, parts)) if parts else None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when nodes load different NCCL releases (unknown versions are not compared)."""
    known = [v for n in nodes if (v := version_tuple(node_version(n)))]
    if known and min(known) >= CHECKED_SINCE:
        consequence = ("; NCCL stops at init with 'Mismatched NCCL version detected' "
                       "(checked since 2.23)")
    else:
        consequence = ("; below 2.23 NCCL does not check versions, and ranks on different "
                       "releases fail unpredictably (hangs or crashes at connect, or defaults "
                       "that disagree)")
    return mismatch(nodes, lambda n: normalised(node_version(n)), "NCCL versions",
                    "nccl.version", consequence)


RULE = Rule(
    id="cluster-nccl-version-mismatch",
    title="Run one NCCL version on every node",
    severity=Severity.ERROR,
    reads=("nccl.versions", "nccl.torch_loads?", "nccl.system_loads?"),
    sets=(),
    why=("Since 2.23 NCCL compares every rank's version at init and fails with 'Mismatched "
         "NCCL version detected' (src/init.cc, v2.23.4-1); older releases do not check, and "
         "ranks on different versions exchange structures that may not match, or disagree on "
         "defaults (IB timeout, GID selection, protocols). Builds of one release for different "
         "CUDA versions (2.21.5 and 2.21.5+cuda12.2) are the same release. torch wheels bundle "
         "their own NCCL, so two nodes with the same torch can still differ through LD_PRELOAD "
         "or a different wheel (NVIDIA/nccl#286)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.23.4-1/src/init.cc",
    fix="Install the same nvidia-nccl-cu12 (or libnccl2) version on every node; check with "
        "NCCL_DEBUG=VERSION.",
    check=check,
    scope="cluster",
)
