"""nccl-ibverbs-unloadable: RDMA hardware NCCL's IB transport cannot use: it silently uses sockets.

NCCL's internal IB transport needs three things the probe sees (src/misc/ibvsymbols.cc,
src/transport/net_ib/init.cc): libibverbs must dlopen, the verbs library must list the devices
(its provider, e.g. libmlx5, must load), and the device nodes in /dev/infiniband must exist
(a container started without ``--device=/dev/infiniband`` sees the sysfs devices but cannot
open them). When any is missing NCCL logs at INFO only and picks the Socket transport.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when /sys/class/infiniband lists devices that NCCL's verbs path cannot reach."""
    devices = [d.get("name") for d in fact(facts, "ib.devices", [])]
    if not devices:
        return []
    verbs = fact(facts, "nccl.ibverbs", {})
    dev_ib = fact(facts, "ib.dev_infiniband", {})
    evidence = {"ib.devices": devices, "nccl.ibverbs": verbs, "ib.dev_infiniband": dev_ib}
    socket = "NCCL will print 'Using network Socket' (or 'NET/IB : No device found.')"
    if verbs.get("loaded") is False:
        return [Finding(
            message=(f"{len(devices)} RDMA device(s) present but libibverbs does not load "
                     f"({verbs.get('error') or 'not found'}): {socket}"),
            evidence=evidence)]
    if verbs.get("loaded") and verbs.get("devices") == [] and dev_ib.get("visible") is not False:
        broken = [p["name"] for p in verbs.get("providers") or []
                  if isinstance(p, dict) and p.get("loaded") is False]
        why = (f"providers that do not load: {', '.join(broken)}" if broken
               else "no provider for these devices")
        return [Finding(
            message=(f"libibverbs loads but lists none of the {len(devices)} RDMA device(s) "
                     f"({why}): {socket}"),
            fix=("Install the verbs provider for the NIC (libmlx5 from rdma-core's "
                 "ibverbs-providers / MLNX_OFED) and check with 'ibv_devices'."),
            evidence=evidence)]
    if dev_ib.get("visible") is False:
        return [Finding(
            message=(f"{len(devices)} RDMA device(s) in /sys/class/infiniband but /dev/infiniband "
                     f"is not visible, so verbs cannot open them: {socket}"),
            fix=("Pass the devices into the container: docker run --device=/dev/infiniband "
                 "--cap-add=IPC_LOCK (Kubernetes: the RDMA device plugin)."),
            evidence=evidence)]
    return []


RULE = Rule(
    id="nccl-ibverbs-unloadable",
    title="Make the RDMA devices usable by libibverbs",
    severity=Severity.ERROR,
    reads=("ib.devices?", "ib.dev_infiniband?", "nccl.ibverbs"),
    sets=(),
    why=("NCCL's IB transport dlopens libibverbs.so / libibverbs.so.1 (src/misc/ibvsymbols.cc) "
         "and uses the ports ibv_get_device_list returns (src/transport/net_ib.cc, net_ib/init.cc "
         "from v2.29.2-1). When the "
         "library, its provider or the /dev/infiniband device nodes are missing it logs only at "
         "INFO ('Failed to open libibverbs.so[.1]' in v2.18.1-1, 'Count not open' in v2.30.7-1) "
         "and falls through to the Socket transport (src/plugin/net.cc), so jobs run at TCP "
         "speed without an error."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/misc/ibvsymbols.cc",
    fix=("Install rdma-core userspace (libibverbs1 and the provider, e.g. ibverbs-providers for "
         "libmlx5) in the image, and pass --device=/dev/infiniband to the container; set "
         "NCCL_IB_DISABLE=1 only if RDMA is not meant to be used."),
    check=check,
)
