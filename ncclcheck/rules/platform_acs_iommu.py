"""platform-acs-iommu: PCIe ACS redirects on the switch ports between GPUs and NICs, or a
translating IOMMU. ACS on CPU root ports (a workstation's GPUs each on its own root port) is
not reported: NCCL's docs ask to disable it on PCI switches, where P2P would stay below the
root complex."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact

#: ACSCtl bits that send peer-to-peer requests up to the root complex (NCCL's troubleshooting
#: page shows SrcValid+ as the sign that ACS is on).
REDIRECTS = ("SrcValid", "ReqRedir", "CmpltRedir")


def _redirects(bridge: dict[str, Any]) -> bool:
    return any((bridge.get("acs") or {}).get(bit) for bit in REDIRECTS)


def acs_on(facts: dict[str, Any]) -> dict[str, list[str]]:
    """``{bridge: [device, ...]}`` for PCIe switch ports with an ACS redirect on, between a
    GPU and a GPU or NIC that share that switch (the pairs whose P2P/GDR stays below the root
    port, and which ACS sends up to the root complex). Root ports (the first bridge) and pairs
    that share no switch are left out: their traffic crosses the root complex anyway, and NCCL's
    docs ask to disable ACS on PCI switches.

    >>> def dev(bdf, kind, *bridges):
    ...     return {"device": bdf, "kind": kind, "bridges": [
    ...         {"bdf": b.strip("+"), "acs": {"SrcValid": b.endswith("+")}} for b in bridges]}
    >>> doc = {"sections": {"platform": {"status": "ok", "data": {"pci_paths": [
    ...     dev("0000:1a:00.0", "gpu", "0000:15:01.0+", "0000:16:00.0", "0000:17:01.0+"),
    ...     dev("0000:1b:00.0", "nic", "0000:15:01.0+", "0000:16:00.0", "0000:17:02.0"),
    ...     dev("0000:c1:00.0", "gpu", "0000:c0:01.1+")]}}}}
    >>> acs_on(doc)
    {'0000:17:01.0': ['0000:1a:00.0', '0000:1b:00.0']}
    """
    paths = [p for p in fact(facts, "platform.pci_paths", []) if p.get("kind") in ("gpu", "nic")]
    out: dict[str, list[str]] = {}
    for i, a in enumerate(paths):
        for b in paths[i + 1:]:
            if "gpu" not in (a.get("kind"), b.get("kind")):
                continue
            ba, bb = a.get("bridges") or [], b.get("bridges") or []
            shared = 0
            while shared < min(len(ba), len(bb)) and ba[shared].get("bdf") == bb[shared].get("bdf"):
                shared += 1
            if shared < 2:  # no switch in common: only the root port, or nothing
                continue
            for bridge in ba[shared - 1:] + bb[shared:]:
                if _redirects(bridge):
                    devices = out.setdefault(bridge["bdf"], [])
                    devices += [d for d in (a["device"], b["device"]) if d not in devices]
    return out


def check(facts: dict[str, Any]) -> list[Finding]:
    """Bare metal: error for ACS redirects above GPUs/NICs, warning for a translating IOMMU.
    In a VM: warning for ACS redirects, with ATS as the fix."""
    acs = acs_on(facts)
    vm = fact(facts, "platform.virtualized") is True
    translated = sorted({p.get("iommu_group_type") for p in fact(facts, "platform.pci_paths", [])
                         if p.get("iommu_group_type") in ("DMA", "DMA-FQ")})
    cmdline = fact(facts, "platform.iommu.cmdline", {})
    findings = []
    if acs:
        bridges = ", ".join(f"{b} (above {', '.join(d[:3])})" for b, d in sorted(acs.items())[:6])
        findings.append(Finding(
            message=(f"PCIe ACS redirects peer-to-peer traffic on {len(acs)} switch port(s): "
                     f"{bridges}; CUDA and NVML may still report P2P as supported, but GPU-GPU "
                     "and GPU-NIC (GDR) traffic below the switch goes up through the root "
                     "complex: hangs or a fraction of the bandwidth"),
            fix=("In a VM enable ATS on the NICs and in the hypervisor (ACS must stay on for "
                 "passthrough)" if vm else
                 "Disable ACS in the BIOS, or at boot: setpci -s <bridge> ECAP_ACS+0x6.w=0000 "
                 "for each bridge listed (the NCCL troubleshooting page has a script)"),
            evidence={"platform.pci_paths.acs": acs, "platform.virtualized": vm},
            severity=Severity.WARNING if vm else Severity.ERROR))
    if translated and not vm:
        findings.append(Finding(
            message=("the IOMMU translates DMA for the GPUs/NICs (group type "
                     f"{', '.join(translated)}, "
                     f"kernel options {cmdline or 'none'}): peer-to-peer and GPUDirect RDMA "
                     "traffic is remapped by the IOMMU, which is slow or breaks it"),
            fix="Boot with iommu=pt (and intel_iommu=on / amd_iommu=on), or disable the IOMMU",
            evidence={"platform.iommu": {"cmdline": cmdline, "group_types": translated}},
            severity=Severity.WARNING))
    return findings


RULE = Rule(
    id="platform-acs-iommu",
    title="Turn off PCIe ACS and IOMMU translation on bare metal",
    severity=Severity.ERROR,
    reads=("platform.pci_paths", "platform.virtualized", "platform.iommu"),
    sets=(),
    why=("With ACS on, a PCIe switch forwards peer-to-peer requests between its ports to the root complex, which "
         "may drop or slow them; CUDA and NVML still report P2P as supported, so NCCL uses P2P "
         "and GPUDirect RDMA and hangs or crawls (NVIDIA/nccl#199, #1737; nccl-tests#115). An "
         "IOMMU that translates (not passthrough) does the same to every P2P access. NCCL's "
         "troubleshooting page: disable ACS on the PCI switches on bare metal, enable ATS in "
         "VMs. Devices on separate root ports talk through the root complex anyway."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "gpu_troubleshooting.html#pci-access-control-services-acs",
    fix="Disable ACS (BIOS or setpci) and use iommu=pt on bare metal; enable ATS in VMs.",
    check=check,
)
