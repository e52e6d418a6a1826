"""Terminal views of the ``netpath`` and ``platform`` sections: labelled rows and prose, never a
dump of the facts' keys (``--json`` has them all).

The rp_filter/ARP sysctl table appears only when a value is not the kernel's default (0 for
each: ``Documentation/networking/ip-sysctl.rst``); otherwise one line says they are.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ncclcheck.render.sections import grid, table

#: The kernel's defaults of the sysctls netpath reads (ip-sysctl.rst: all three are 0).
SYSCTL_DEFAULTS = {"rp_filter": 0, "arp_ignore": 0, "arp_announce": 0}


def _firewall(fw: dict[str, Any]) -> Text:
    if not fw.get("readable"):
        return Text("not readable (the section's error says why): whether peers may connect "
                    "is unknown", style="yellow")
    rules = [str(r) for r in fw.get("input_rules") or []]
    said = (f"{fw.get('tool') or '?'}: INPUT policy {fw.get('input_policy') or '?'}, "
            + (f"{len(rules)} rule{'s' if len(rules) != 1 else ''}" if rules else "no rules"))
    if fw.get("ufw_active") is not None:
        said += f"; ufw {'active' if fw.get('ufw_active') else 'inactive'}"
    return Text(said)


def _resolve(res: dict[str, Any]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    if res.get("hostname"):
        addrs = ", ".join(map(str, res.get("hostname_addrs") or []))
        rows.append((f"{res['hostname']} resolves to",
                     addrs + (f" ({res['source']})" if addrs and res.get("source") else "")
                     or "not resolved on this node"))
    if res.get("master_addr"):
        rows.append((f"MASTER_ADDR {res['master_addr']}",
                     ", ".join(map(str, res.get("master_addrs") or [])) or "does not resolve"))
    return rows


def odd_sysctls(sysctl: dict[str, Any]) -> list[list[Any]]:
    """Rows (interface, rp_filter, arp_ignore, arp_announce) of interfaces where one differs
    from the kernel's default.

    >>> odd_sysctls({"all": {"rp_filter": 0}, "eth0": {"rp_filter": 1, "arp_ignore": 0}})
    [['eth0', 1, 0, '-']]
    """
    rows = []
    for name, values in sysctl.items():
        if not isinstance(values, dict):
            continue
        if any(values.get(k) not in (None, d) for k, d in SYSCTL_DEFAULTS.items()):
            rows.append([name, *(values.get(k, "-") for k in SYSCTL_DEFAULTS)])
    return rows


def netpath_view(d: dict[str, Any]) -> list[Any]:
    """Firewall, name resolution and routes as rows; sysctls only where not the default."""
    rows: list[tuple[str, Any]] = [("firewall", _firewall(d.get("firewall") or {}))]
    for rule in (d.get("firewall") or {}).get("input_rules") or []:
        rows.append(("", Text(str(rule), style="dim")))
    rows += _resolve(d.get("resolve") or {})
    out: list[Any] = [grid(rows)]
    routes = d.get("routes") or []
    if routes:
        out.append(table("IPv4 routes", ["destination", "via", "interface", "metric"],
                         [[r.get("destination"), r.get("gateway") or "direct", r.get("interface"),
                           r.get("metric")] for r in routes]))
    sysctl = d.get("sysctl") or {}
    odd = odd_sysctls(sysctl)
    if odd:
        out.append(table("sysctls not at the kernel's default (0)", ["interface", *SYSCTL_DEFAULTS],
                         odd))
    elif sysctl:
        out.append(Text("rp_filter, arp_ignore, arp_announce: the kernel's default (0) on every "
                        "interface", style="dim"))
    return out


def _iommu(iommu: dict[str, Any]) -> str:
    options = iommu.get("cmdline") or {}
    said = (" ".join(f"{k}={v}" for k, v in options.items()) if options
            else "no IOMMU option on the kernel command line")
    groups = iommu.get("groups")
    if groups:
        said += f"; {groups} IOMMU group{'s' if groups != 1 else ''} hold GPUs or NICs"
    return said


def _bridge(b: dict[str, Any]) -> str:
    """``0000:40:01.1 ACS redirects P2P`` (ReqRedir or CmpltRedir on), ``... ACS off``, or the
    address alone when lspci could not say."""
    acs = b.get("acs")
    if not isinstance(acs, dict):
        return str(b.get("bdf"))
    redirect = acs.get("ReqRedir") or acs.get("CmpltRedir")
    return f"{b.get('bdf')} ACS {'redirects P2P' if redirect else 'off'}"


def platform_view(d: dict[str, Any]) -> list[Any]:
    """Virtualisation, IOMMU, the PCIe path above each GPU and NIC, NVSwitch fabric."""
    virt = d.get("virtualized")
    manager = d.get("fabric_manager")
    rows: list[tuple[str, Any]] = [
        ("virtual machine", "yes (hypervisor flag)" if virt else "no" if virt is False
         else "unknown"),
        ("IOMMU", _iommu(d.get("iommu") or {})),
        ("PCIe ACS", "read from lspci" if d.get("acs_readable")
         else "not readable (lspci -vvv shows it to root, where an NVIDIA GPU is)"),
        ("fabric manager", manager or "not installed or no systemd"),
    ]
    out: list[Any] = [grid(rows)]
    paths = d.get("pci_paths") or []
    if paths:
        out.append(table("PCIe paths", ["device", "kind", "IOMMU domain", "bridges (ACS)"],
                         [[p.get("device"), p.get("kind"), p.get("iommu_group_type") or "-",
                           "\n".join(_bridge(b) for b in p.get("bridges") or []) or "none"]
                          for p in paths], wrap=("bridges (ACS)",)))
    fabric = d.get("fabric") or []
    if fabric:
        out.append(table("NVSwitch fabric", ["GPU", "state", "status"],
                         [[f.get("pci_bus_id"), f.get("state") or "-", f.get("status") or "-"]
                          for f in fabric]))
    return out


NET_VIEWS = {"netpath": netpath_view, "platform": platform_view}
