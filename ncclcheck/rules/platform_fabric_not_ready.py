"""platform-fabric-not-ready: an NVSwitch system whose fabric manager is down or whose GPUs did
not finish joining the fabric."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def on_nvswitch(facts: dict[str, Any]) -> bool:
    """Whether any GPU has an NVLink to an NVSwitch, or any GPU reports a fabric state."""
    links = [l for g in fact(facts, "gpu.gpus", []) for l in (g.get("nvlinks") or [])]
    return any(l.get("remote_type") == "switch" for l in links) or any(
        f.get("state") for f in fact(facts, "platform.fabric", []))


def check(facts: dict[str, Any]) -> list[Finding]:
    """Error when an NVSwitch node's fabric manager is inactive or a GPU's fabric state is not
    Completed/Success."""
    if not on_nvswitch(facts):
        return []
    fabric = fact(facts, "platform.fabric", [])
    bad = [f for f in fabric if f.get("state") and (f.get("state") != "Completed"
                                                    or f.get("status") not in (None, "Success"))]
    fm = fact(facts, "platform.fabric_manager")
    known = any(f.get("state") for f in fabric)
    # the GPUs' own fabric state wins where it is known (GB200 trays run no local fabric
    # manager); the service only decides when nvidia-smi could not say
    fm_down = not known and fm in ("inactive", "failed", "activating", "deactivating")
    if not bad and not fm_down:
        return []
    parts = []
    if fm_down or (bad and fm not in (None, "active")):
        parts.append(f"the nvidia-fabricmanager service is {fm}")
    if bad:
        parts.append(f"{len(bad)} of {len(fabric)} GPUs are not registered with the fabric ("
                     + ", ".join(f"{f['pci_bus_id']} {f['state']}/{f.get('status') or 'N/A'}"
                                 for f in bad[:4]) + ")")
    return [Finding(
        message=("on this NVSwitch system " + " and ".join(parts) + ": CUDA fails with "
                 "'system not yet initialized' and NCCL's NVLink/NVLS paths fail or hang"),
        fix=("systemctl enable --now nvidia-fabricmanager (its version must match the driver); "
             "after a fabric-manager restart, reset the GPUs (nvidia-smi -r) or reboot so that "
             "NVLS works again; until then NCCL_NVLS_ENABLE=0 avoids NVLink SHARP"),
        evidence={"platform.fabric": fabric, "platform.fabric_manager": fm})]


RULE = Rule(
    id="platform-fabric-not-ready",
    title="Run the fabric manager on NVSwitch systems",
    severity=Severity.ERROR,
    reads=("platform.fabric", "platform.fabric_manager", "gpu.gpus?"),
    sets=(),
    why=("On HGX/DGX NVSwitch systems the fabric manager trains the NVSwitch links and registers "
         "each GPU (fabric state Not Started -> In Progress -> Completed); until then CUDA "
         "returns 'system not yet initialized'. NCCL reads the same state through NVML "
         "(src/init.cc, nvmlDeviceGetGpuFabricInfoV; NVML_GPU_FABRIC_STATE_COMPLETED in "
         "src/include/nvmlwrap.h) and NVLS multicast (src/transport/nvls.cc, cuMulticastCreate) "
         "breaks after a fabric-manager restart until the GPUs are reset "
         "(NVIDIA/nccl#1488, #1562; nccl-tests#216, #264)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/include/nvmlwrap.h",
    fix="Start nvidia-fabricmanager (matching the driver), then reset the GPUs or reboot.",
    check=check,
)
