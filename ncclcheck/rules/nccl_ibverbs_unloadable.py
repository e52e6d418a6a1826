"""nccl-ibverbs-unloadable: RDMA hardware, but libibverbs does not load: NCCL silently uses sockets."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when /sys/class/infiniband lists devices and libibverbs cannot be loaded."""
    devices = fact(facts, "ib.devices", [])
    verbs = fact(facts, "nccl.ibverbs", {})
    if not devices or verbs.get("loaded") is not False:
        return []
    return [Finding(
        message=(f"{len(devices)} RDMA device(s) present but libibverbs does not load "
                 f"({verbs.get('error') or 'not found'}): NCCL will print 'Using network Socket'"),
        evidence={"ib.devices": [d.get("name") for d in devices], "nccl.ibverbs": verbs},
    )]


RULE = Rule(
    id="nccl-ibverbs-unloadable",
    title="Install libibverbs where RDMA hardware is present",
    severity=Severity.ERROR,
    reads=("ib.devices", "nccl.ibverbs"),
    sets=(),
    why=("NCCL's IB transport dlopens libibverbs.so / libibverbs.so.1 (src/misc/ibvsymbols.cc); "
         "when that fails it logs only at INFO since 2.11 and falls through to the Socket "
         "transport (src/plugin/net.cc), so jobs run at TCP speed without an error."),
    docs="https://github.com/NVIDIA/nccl/blob/master/src/misc/ibvsymbols.cc",
    fix=("Install rdma-core userspace (libibverbs1 and the provider, e.g. libmlx5 / ibverbs-providers) "
         "in the image, and pass --device=/dev/infiniband to the container."),
    check=check,
)
