"""platform-acs-iommu: PCIe ACS redirects, or a translating IOMMU, between GPUs and NICs."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact

#: ACSCtl bits that send peer-to-peer requests up to the root complex (NCCL's troubleshooting
#: page shows SrcValid+ as the sign that ACS is on).
REDIRECTS = ("SrcValid", "ReqRedir", "CmpltRedir")


def acs_on(facts: dict[str, Any]) -> dict[str, list[str]]:
    """``{bridge: [device, ...]}`` for bridges above a GPU or NIC with an ACS redirect on.

    >>> doc = {"sections": {"platform": {"status": "ok", "data": {"pci_paths": [
    ...     {"device": "0000:1a:00.0", "kind": "gpu", "bridges": [
    ...         {"bdf": "0000:15:01.0", "acs": None},
    ...         {"bdf": "0000:16:00.0", "acs": {"SrcValid": True, "ReqRedir": True}}]}]}}}}
    >>> acs_on(doc)
    {'0000:16:00.0': ['0000:1a:00.0']}
    """
    out: dict[str, list[str]] = {}
    for path in fact(facts, "platform.pci_paths", []):
        for bridge in path.get("bridges") or []:
            if any((bridge.get("acs") or {}).get(bit) for bit in REDIRECTS):
                out.setdefault(bridge["bdf"], []).append(path["device"])
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
            message=(f"PCIe ACS redirects peer-to-peer traffic on {len(acs)} bridge(s): {bridges}; "
                     "nvidia-smi still reports P2P OK, but GPU-GPU and GPU-NIC (GDR) traffic "
                     "goes through the root complex: hangs or a fraction of the bandwidth"),
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
    why=("With ACS on, a PCIe switch forwards peer-to-peer requests to the root complex, which "
         "may drop or slow them; CUDA and NVML still report P2P as supported, so NCCL uses P2P "
         "and GPUDirect RDMA and hangs or crawls (NVIDIA/nccl#199, #1737; nccl-tests#115). An "
         "IOMMU that translates (not passthrough) does the same to every P2P access. NCCL's "
         "troubleshooting page: disable ACS on bare metal, enable ATS in VMs."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "gpu_troubleshooting.html#pci-access-control-services-acs",
    fix="Disable ACS (BIOS or setpci) and use iommu=pt on bare metal; enable ATS in VMs.",
    check=check,
)
