"""cloud-azure-topo-file: on Azure ND VMs, keep the topology file /etc/nccl.conf names.

Azure's HPC images write ``/etc/nccl.conf`` with ``NCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml``
(ndv5: ``/opt/microsoft/ndv5/topo.xml``), ``NCCL_IB_PCI_RELAXED_ORDERING=1`` and
``NCCL_IGNORE_CPU_AFFINITY=1`` (Azure/azhpc-images ``components/customizations/ndv*.sh``): the
VM's virtual PCI tree hides which GPU sits near which HCA, and only the XML tells NCCL. NCCL reads
``NCCL_CONF_FILE`` (since 2.23; before it, and when it is unset, ``~/.nccl.conf``) and then
``/etc/nccl.conf``, the first value winning (src/misc/param.cc ``initEnvFunc``, v2.23.4-1), so
an env file exported or named by NCCL_CONF_FILE keeps Azure's file in force, while copying it
*over* /etc/nccl.conf would drop the topology.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname

AZURE_DRIVERS = ("hv_netvsc", "mana")
#: Evidence key of the finding naming nodes whose /etc/nccl.conf holds the topology file.
TOPO_IN_ETC = "etc_nccl_conf.NCCL_TOPO_FILE"


def system_conf(facts: dict[str, Any]) -> dict[str, str]:
    """The values of /etc/nccl.conf on this node."""
    for conf in fact(facts, "nccl.config_files", []):
        if conf.get("source") == "system":
            return dict(conf.get("values") or {})
    return {}


def is_azure(facts: dict[str, Any]) -> bool:
    """An Azure VM: a Hyper-V or MANA NIC, or Azure's topology file in /etc/nccl.conf."""
    if "/opt/microsoft/" in system_conf(facts).get("NCCL_TOPO_FILE", ""):
        return True
    return any(i.get("driver") in AZURE_DRIVERS for i in fact(facts, "network.interfaces", []))


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Say to keep /etc/nccl.conf's topology file; warn where it is missing or overridden."""
    azure = [n for n in nodes if is_azure(n)]
    if not azure:
        return []
    kept: dict[str, str] = {}
    missing: list[str] = []
    overridden: dict[str, str] = {}
    for node in azure:
        host = hostname(node)
        topo = system_conf(node).get("NCCL_TOPO_FILE")
        env_topo = (fact(node, "env.nccl") or {}).get("NCCL_TOPO_FILE")
        if env_topo and env_topo != topo:
            overridden[host] = f"{env_topo} (the file says {topo or 'nothing'})"
        elif topo:
            kept[host] = topo
        elif fact(node, "gpu.gpus", []) and fact(node, "ib.devices", []):
            missing.append(host)
    findings = []
    if missing:
        findings.append(Finding(
            message=(f"Azure GPU VM(s) with RDMA but no NCCL_TOPO_FILE in /etc/nccl.conf: "
                     f"{', '.join(missing[:6])}; NCCL cannot see GPU/HCA affinity in the VM"),
            fix="Use an Azure HPC image (it writes /etc/nccl.conf), or set NCCL_TOPO_FILE to "
                "the topology XML for the VM size from Azure/azhpc-images.",
            severity=Severity.WARNING, hosts=tuple(missing)))
    if overridden:
        findings.append(Finding(
            message=("NCCL_TOPO_FILE in the environment overrides /etc/nccl.conf on "
                     + "; ".join(f"{h}: {v}" for h, v in list(overridden.items())[:4])),
            fix="Unset NCCL_TOPO_FILE in the environment so /etc/nccl.conf's value applies.",
            severity=Severity.WARNING, hosts=tuple(overridden)))
    if kept:
        findings.append(Finding(
            message=(f"/etc/nccl.conf sets NCCL's topology file on {len(kept)} Azure node(s): "
                     "keep it; use this env file with NCCL_CONF_FILE or export it, never copy "
                     "it over /etc/nccl.conf"),
            severity=Severity.INFO, hosts=tuple(kept), evidence={TOPO_IN_ETC: kept}))
    return findings


RULE = Rule(
    id="cloud-azure-topo-file",
    title="On Azure ND, keep the topology file in /etc/nccl.conf",
    severity=Severity.INFO,
    reads=("network.interfaces", "nccl.config_files", "env.nccl?", "gpu.gpus?", "ib.devices?"),
    sets=(),
    why=("Azure ND VMs expose a virtual PCI topology, so NCCL needs the XML that "
         "/etc/nccl.conf names (NCCL_TOPO_FILE=/opt/microsoft/nd*/topo.xml, azhpc-images); NCCL "
         "reads NCCL_CONF_FILE (since 2.23, src/misc/param.cc v2.23.4-1) or else ~/.nccl.conf "
         "first and /etc/nccl.conf after, first value winning, so exporting our file, or naming "
         "it in NCCL_CONF_FILE, keeps it."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-topo-file",
    fix="Keep /etc/nccl.conf; export the recommended variables, or name the file in "
        "NCCL_CONF_FILE (NCCL >= 2.23).",
    check=check,
    scope="cluster",
)
