"""nccl-version-multiple: several NCCL versions on one node, and which one torch uses."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, version_tuple


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when the libraries found report more than one distinct version.

    The message says which one torch loads and which one a program linked to libnccl.so.2
    (nccl-tests, a C++ job) gets from the dynamic loader, since those are the two that matter.
    """
    libs = fact(facts, "nccl.libraries", [])
    versions = sorted({lib["version"] for lib in libs if lib.get("version")}, key=version_tuple)
    if len(versions) < 2:
        return []
    loads = fact(facts, "nccl.torch_loads") or {}
    system = fact(facts, "nccl.system_loads") or {}
    which = ""
    if loads.get("path"):
        which += f"; torch loads {loads.get('version') or '?'} from {loads['path']}"
    elif loads.get("reason"):
        which += f"; torch: {loads['reason']}"
    if system.get("path"):
        which += (f"; programs linked to libnccl.so.2 (nccl-tests) get "
                  f"{system.get('version') or '?'} from {system['path']}")
    listing = ", ".join(f"{lib['version']} ({lib['path']})"
                        for lib in sorted((lib for lib in libs if lib.get("version")),
                                          key=lambda lib: version_tuple(lib["version"]) or ()))
    # Versions that differ only in their patch level (2.28.3 and 2.28.9, seen on an H200 VM whose
    # image holds a system libnccl beside torch's wheel) share the release's defaults and wire
    # protocol: worth knowing, not a warning. Minor releases change defaults.
    minors = {version_tuple(v)[:2] for v in versions if version_tuple(v)}
    patch_only = len(minors) == 1 and bool(loads.get("version"))
    return [Finding(
        severity=Severity.INFO if patch_only else None,
        message=f"{len(versions)} NCCL versions on this node: {listing}{which}"
                + ("; they differ only in the patch level" if patch_only else ""),
        evidence={"nccl.libraries": [{k: lib.get(k) for k in ("path", "version")}
                                     for lib in libs],
                  "nccl.torch_loads": loads, "nccl.system_loads": system},
    )]


RULE = Rule(
    id="nccl-version-multiple",
    title="Know which of several NCCL versions each job loads",
    severity=Severity.WARNING,
    reads=("nccl.libraries", "nccl.torch_loads?", "nccl.system_loads?"),
    sets=(),
    why=("torch ships its own NCCL (nvidia-nccl-cu12), while nccl-tests and other tools load the "
         "system libnccl.so.2; every rank prints 'NCCL version X' at init, and ranks on different "
         "versions can fail at connect time or behave differently (defaults change between "
         "releases, e.g. NCCL_IB_TIMEOUT, GID auto-selection in 2.21)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-debug",
    fix=("Use one NCCL version on every node: pin nvidia-nccl-cu12, or LD_PRELOAD the system "
         "library for torch, and compare with 'NCCL_DEBUG=VERSION'."),
    check=check,
)
