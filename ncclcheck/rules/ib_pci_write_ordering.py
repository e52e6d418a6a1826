"""ib-pci-write-ordering: a NIC whose firmware forces relaxed PCIe ordering can corrupt NCCL data.

ConnectX firmware's ``PCI_WR_ORDERING`` is ``per_mkey(0)`` by default: the NIC uses relaxed
ordering only for memory registered with ``IBV_ACCESS_RELAXED_ORDERING``, which NCCL requests
itself where it is safe (``NCCL_IB_PCI_RELAXED_ORDERING``, default 2 = when available: env.rst
and src/transport/net_ib/init.cc@v2.30.7-1). ``force_relax(1)`` makes every NIC write relaxed,
so a write that signals completion can overtake the data it announces. NCCL's maintainers ask
for this first when ranks see 'NET/IB : collective mismatch error' or corrupted results: "did you
force relaxed ordering on the NICs (``mlxconfig -d /dev/mst/<dev> q PCI_WR_ORDERING`` must return
``per_mkey`` not ``forced_relax``)" (NVIDIA/nccl#615; the same in #531 and #523). Guides for
other GPU streaming work set ``force_relax`` for throughput (e.g. luigifcruz/stelline
docs/system-configuration.md), which is how it reaches training nodes.

Read from ``mlxconfig`` (or mstflint's ``mstconfig``); absent tool, no root: unknown, quiet. A
setting only waiting for the next boot is said as such (INFO).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact

FORCED = "force_relax"


def check(facts: dict[str, Any]) -> list[Finding]:
    """Warn for each NIC whose PCI_WR_ORDERING forces relaxed ordering now; INFO for next boot."""
    entries = fact(facts, "ib.pci_ordering", []) or []
    now = [e for e in entries if e.get("current") == FORCED]
    later = [e for e in entries if e.get("current") != FORCED and e.get("next_boot") == FORCED]
    findings = []
    if now:
        names = ", ".join(f"{e.get('device')} ({e.get('pci_address')})" for e in now[:8])
        pending = [e["device"] for e in now if e.get("next_boot") not in (None, FORCED)]
        basis = ("" if all(e.get("basis") == "Current" for e in now) else
                 " (mlxconfig showed only the next-boot value, the running one unless a change "
                 "waits for a reboot)")
        findings.append(Finding(
            message=(f"PCI_WR_ORDERING=force_relax on {names}{basis}: every write of the NIC is "
                     "relaxed-ordered, also into memory NCCL registered for strict ordering, so "
                     "a flag can land before its data: 'NET/IB : collective mismatch error' or "
                     "silently wrong results (NVIDIA/nccl#615)"
                     + (f"; {', '.join(pending)} go back to per_mkey at the next boot"
                        if pending else "")),
            fix=("mlxconfig -d <PCI address> set PCI_WR_ORDERING=0 (per_mkey) on each NIC and "
                 "reboot (or a firmware reset); NCCL then uses relaxed ordering itself where it "
                 "is safe (NCCL_IB_PCI_RELAXED_ORDERING, default 2)"),
            evidence={"ib.pci_ordering": now}))
    if later:
        findings.append(Finding(
            message=(f"PCI_WR_ORDERING becomes force_relax at the next boot on "
                     f"{', '.join(str(e.get('device')) for e in later[:8])}: NCCL's data can "
                     "then be overtaken by its completion flags (NVIDIA/nccl#615)"),
            fix="mlxconfig -d <PCI address> set PCI_WR_ORDERING=0 before rebooting",
            severity=Severity.INFO, evidence={"ib.pci_ordering": later}))
    return findings


RULE = Rule(
    id="ib-pci-write-ordering",
    title="Keep the NIC's PCIe write ordering per_mkey, not force_relax",
    severity=Severity.WARNING,
    reads=("ib.devices?", "ib.pci_ordering?"),
    sets=(),
    why=("NCCL requests relaxed ordering only per memory region, where it is safe "
         "(NCCL_IB_PCI_RELAXED_ORDERING: 2 = use it if available, the default; env.rst "
         "and ncclIbRelaxedOrderingCapable in src/transport/net_ib/init.cc@v2.30.7-1). A NIC "
         "whose firmware forces it (PCI_WR_ORDERING=force_relax) reorders every write; NCCL's "
         "maintainers name it as the first suspect of 'collective mismatch error' and data "
         "corruption and ask for per_mkey (NVIDIA/nccl#615, #531, #523)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
         "#nccl-ib-pci-relaxed-ordering",
    fix="mlxconfig -d <NIC> set PCI_WR_ORDERING=0 (per_mkey), then reboot.",
    check=check,
    peers=True,
)
