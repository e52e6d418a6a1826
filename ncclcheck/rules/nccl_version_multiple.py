"""nccl-version-multiple: several NCCL versions on one node, and which one torch uses."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when the libraries found report more than one distinct version."""
    libs = fact(facts, "nccl.libraries", [])
    versions = sorted({lib["version"] for lib in libs if lib.get("version")})
    if len(versions) < 2:
        return []
    loads = fact(facts, "nccl.torch_loads") or {}
    which = (f"; torch loads {loads.get('version')} from {loads.get('path')}"
             if loads.get("path") else "")
    listing = ", ".join(f"{lib['version']} ({lib['path']})" for lib in libs if lib.get("version"))
    return [Finding(
        message=f"{len(versions)} NCCL versions on this node: {listing}{which}",
        evidence={"nccl.libraries": [{k: lib.get(k) for k in ("path", "version")}
                                     for lib in libs], "nccl.torch_loads": loads},
    )]


RULE = Rule(
    id="nccl-version-multiple",
    title="Know which of several NCCL versions each job loads",
    severity=Severity.WARNING,
    reads=("nccl.libraries",),
    sets=(),
    why=("torch ships its own NCCL (nvidia-nccl-cu12), while nccl-tests and other tools load the "
         "system libnccl.so.2; every rank prints 'NCCL version X' at init, and ranks on different "
         "versions can fail at connect time or behave differently (defaults change between "
         "releases, e.g. NCCL_IB_TIMEOUT, GID auto-selection in 2.21)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    fix=("Use one NCCL version on every node: pin nvidia-nccl-cu12, or LD_PRELOAD the system "
         "library for torch, and compare with 'NCCL_DEBUG=VERSION'."),
    check=check,
)
