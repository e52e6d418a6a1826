"""ib (NIC settings): a RoCE port's QoS (``mlnx_qos -i IFACE``) and a NIC's PCIe write ordering
(``mlxconfig -d PCI q PCI_WR_ORDERING``), for the rules ib-roce-lossless and ib-pci-write-ordering.

* ``qos``: one entry per physical netdev behind each ACTIVE RoCE port (a bond's slaves, since DCB
  lives on the PF): the priority trust state (``pcp`` or ``dscp``), the priorities with PFC on,
  the DSCP -> priority table, the DCBX mode, and where MLNX_OFED's sysfs has them, the ECN
  (DCQCN) switches per priority (``/sys/class/net/IFACE/ecn/roce_{rp,np}/enable/<prio>``) and
  the port's default RoCE traffic class (``/sys/class/infiniband/DEV/tc/PORT/traffic_class``,
  which sites set to move every QP, NCCL's too, into the lossless class);
* ``pci_ordering``: one entry per Mellanox NIC (the first function of each card): the
  ``PCI_WR_ORDERING`` firmware setting, ``per_mkey`` (the default: relaxed ordering only for
  memory registered with it) or ``force_relax`` (every write relaxed; NVIDIA/nccl#615).

Both tools are optional (``mlnx_qos`` ships with MLNX_OFED / mlnx-tools, ``mlxconfig`` with MFT,
``mstconfig`` with mstflint) and may need root: absent, denied or timed out, nothing is recorded
and the rules stay quiet. The first failure stops the remaining calls of that tool.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ncclcheck.host.protocol import Host

QOS_TIMEOUT_S, MLXCONFIG_TIMEOUT_S = 5.0, 15.0
_PRIO_DSCP = re.compile(r"^\s*prio:\s*(\d)\s+dscp:\s*([\d,\s]+?)\s*$")
_PFC_ROW = re.compile(r"^\s*enabled\s+((?:[01]\s+){7}[01])\s*$")
_PARAM = re.compile(r"^\s*(\*?)\s*([A-Z][A-Z0-9_]*(?:\[[^\]]*\])?)\s+(\S.*?)\s*$")
_CHOICE = re.compile(r"^([A-Za-z_][\w]*)\((\d+)\)$")


def parse_mlnx_qos(text: Optional[str]) -> Optional[dict[str, Any]]:
    """``mlnx_qos -i IFACE`` -> trust, PFC priorities, DSCP table, DCBX mode; None when unreadable.

    Recorded (https://github.com/att/netarbiter, nvmf/OUTPUTSAMPLE.setup-nic-lossless-layer3.sh.md,
    a ConnectX in DSCP trust with PFC on priority 3, cut to the first prio lines):

    >>> qos = parse_mlnx_qos('''DCBX mode: OS controlled
    ... Priority trust state: dscp
    ... dscp2prio mapping:
    ...         prio:0 dscp:07,06,05,04,03,02,01,00,
    ...         prio:3 dscp:31,30,29,28,27,26,25,24,
    ... Cable len: 7
    ... PFC configuration:
    ...         priority    0   1   2   3   4   5   6   7
    ...         enabled     0   0   0   1   0   0   0   0
    ... tc: 0 ratelimit: unlimited, tsa: vendor
    ...          priority:  1
    ... ''')
    >>> qos["trust"], qos["pfc_enabled"], qos["dcbx"], qos["dscp2prio"][3][:3]
    ('dscp', [3], 'os', [24, 25, 26])

    Newer mlnx_qos (a ``buffer`` row, ``default priority:``), lossy out of the box: a
    ConnectX-5 in PCP trust (https://cnblogs.com/CQzhangyu/p/18139026):

    >>> qos = parse_mlnx_qos('''DCBX mode: OS controlled
    ... Priority trust state: pcp
    ... default priority:
    ... Receive buffer size (bytes): 0,262016,0,0,0,0,0,0,
    ... Cable len: 7
    ... PFC configuration:
    ...         priority    0   1   2   3   4   5   6   7
    ...         enabled     0   0   0   0   0   0   0   0
    ...         buffer      1   1   1   1   1   1   1   1
    ... ''')
    >>> qos["trust"], qos["pfc_enabled"], qos["dscp2prio"]
    ('pcp', [], None)
    >>> parse_mlnx_qos("Interface name is required"), parse_mlnx_qos(None)
    (None, None)
    """
    trust = dcbx = None
    pfc: Optional[list[int]] = None
    table: dict[int, list[int]] = {}
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("Priority trust state:"):
            trust = stripped.partition(":")[2].strip().lower() or None
        elif stripped.startswith("DCBX mode:"):
            dcbx = "os" if "OS" in stripped else "firmware" if "irmware" in stripped else None
        elif (m := _PRIO_DSCP.match(line)):
            table.setdefault(int(m.group(1)), []).extend(
                int(d) for d in m.group(2).replace(" ", "").split(",") if d)
        elif (m := _PFC_ROW.match(line)) and pfc is None:
            pfc = [i for i, bit in enumerate(m.group(1).split()) if bit == "1"]
    if trust is None and pfc is None:
        return None
    dscp2prio = [sorted(table.get(p, [])) for p in range(8)] if table else None
    return {"trust": trust, "pfc_enabled": pfc, "dscp2prio": dscp2prio, "dcbx": dcbx}


def parse_mlxconfig(text: Optional[str]) -> dict[str, Any]:
    """``mlxconfig -d DEV q [PARAM...]`` -> ``{"device_type", "columns", "values": {name: [..]}}``.

    Recorded: a ConnectX-5 queried by MFT 4.11 (one ``Next Boot`` column; the same layout as
    the ConnectX-6 queries in canonical/maas-commissioning-scripts#2), from a public DCQCN
    how-to found by code search, cut:

    >>> out = parse_mlxconfig('''
    ... Device #1:
    ... ----------
    ...
    ... Device type:    ConnectX5
    ... Name:           N/A
    ... Device:         /dev/mst/mt4119_pciconf0
    ...
    ... Configurations:                              Next Boot
    ...          NUM_OF_PFC_P1                       8
    ...          PCI_WR_ORDERING                     per_mkey(0)
    ...          PCI_ATOMIC_MODE                     PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED(0)
    ... ''')
    >>> out["device_type"], out["columns"], out["values"]["PCI_WR_ORDERING"]
    ('ConnectX5', ['Next Boot'], ['per_mkey(0)'])

    Newer MFT prints ``Default``, ``Current`` and ``Next Boot`` and stars a changed value (the
    layout of k8snetworkplumbingwg/sriov-network-operator#358's ConnectX-6 Lx query):

    >>> out = parse_mlxconfig("Configurations:        Default          Current          Next Boot\\n"
    ...                       "*  PCI_WR_ORDERING   per_mkey(0)      force_relax(1)   force_relax(1)")
    >>> out["columns"], out["values"]["PCI_WR_ORDERING"], out["changed"]
    (['Default', 'Current', 'Next Boot'], ['per_mkey(0)', 'force_relax(1)', 'force_relax(1)'], ['PCI_WR_ORDERING'])
    >>> parse_mlxconfig("-E- Failed to open device")["values"]
    {}
    """
    device_type = None
    columns: list[str] = []
    values: dict[str, list[str]] = {}
    changed: list[str] = []
    for line in (text or "").splitlines():
        if line.startswith("Device type:"):
            device_type = line.partition(":")[2].strip() or None
        elif line.startswith("Configurations:"):
            columns = [c for c in re.split(r"\s{2,}", line.partition(":")[2].strip()) if c]
        elif columns and (m := _PARAM.match(line)):
            cells = re.split(r"\s{2,}", m.group(3))
            if len(cells) == len(columns):
                values[m.group(2)] = cells
                if m.group(1):
                    changed.append(m.group(2))
    return {"device_type": device_type, "columns": columns, "values": values, "changed": changed}


def setting(parsed: dict[str, Any], name: str) -> dict[str, Optional[str]]:
    """One parameter's value now and at next boot, the ``(n)`` suffix dropped.

    Without a ``Current`` column (older MFT) ``current`` is the ``Next Boot`` value, which is
    the running one unless a change waits for a reboot (``pending_reboot_unknown``).

    >>> setting({"columns": ["Default", "Current", "Next Boot"],
    ...          "values": {"X": ["per_mkey(0)", "force_relax(1)", "per_mkey(0)"]}}, "X")
    {'current': 'force_relax', 'next_boot': 'per_mkey', 'default': 'per_mkey', 'basis': 'Current'}
    >>> setting({"columns": ["Next Boot"], "values": {"X": ["per_mkey(0)"]}}, "X")["basis"]
    'Next Boot'
    """
    cells = dict(zip(parsed.get("columns") or [], (parsed.get("values") or {}).get(name) or []))

    def value(column: str) -> Optional[str]:
        text = cells.get(column)
        m = _CHOICE.match(text or "")
        return m.group(1) if m else text

    basis = "Current" if "Current" in cells else "Next Boot"
    return {"current": value(basis), "next_boot": value("Next Boot"), "default": value("Default"),
            "basis": basis if cells else None}


def _physical(host: Host, netdev: str) -> list[str]:
    """The netdevs DCB settings live on: a bond's slaves, else the netdev itself."""
    slaves = (host.read(f"sys/class/net/{netdev}/bonding/slaves") or "").split()
    return slaves or [netdev]


def _ecn(host: Host, netdev: str, side: str) -> Optional[list[int]]:
    base = f"sys/class/net/{netdev}/ecn/{side}/enable"
    if not host.isdir(base):
        return None
    return [p for p in range(8) if (host.read(f"{base}/{p}") or "").strip() == "1"]


def _port_tc(host: Host, dev: str, port: int) -> Optional[int]:
    text = host.read(f"sys/class/infiniband/{dev}/tc/{port}/traffic_class") or ""
    m = re.search(r"(\d+)\s*$", text.strip())
    return int(m.group(1)) if m else None


def qos_entries(host: Host, devices: list[dict[str, Any]], errors: list[str]) -> list[dict[str, Any]]:
    """The ``qos`` list: each ACTIVE RoCE port's physical netdevs through ``mlnx_qos``."""
    out: list[dict[str, Any]] = []
    for dev in devices:
        for port in dev["ports"]:
            if port["link_layer"] != "Ethernet" or port["state"] != "ACTIVE" or not port["netdev"]:
                continue
            for netdev in _physical(host, port["netdev"]):
                result = host.run(["mlnx_qos", "-i", netdev], timeout=QOS_TIMEOUT_S)
                if result.returncode is None or result.timed_out:
                    if result.timed_out:
                        errors.append(result.why_failed())
                    return out  # not installed (or hanging): the other ports would say the same
                parsed = parse_mlnx_qos(result.stdout) if result.ok else None
                if parsed is None:
                    errors.append(f"mlnx_qos -i {netdev}: {result.why_failed() if not result.ok else 'no QoS table'}")
                    continue
                out.append({"port": f"{dev['name']}:{port['port']}", "netdev": netdev, **parsed,
                            "ecn_rp": _ecn(host, netdev, "roce_rp"),
                            "ecn_np": _ecn(host, netdev, "roce_np"),
                            "port_traffic_class": _port_tc(host, dev["name"], port["port"]),
                            "source": "mlnx_qos"})
    return out


def pci_ordering(host: Host, devices: list[dict[str, Any]], errors: list[str]) -> list[dict[str, Any]]:
    """The ``pci_ordering`` list: ``PCI_WR_ORDERING`` of each Mellanox card (mlxconfig, else
    mstflint's mstconfig)."""
    cards: dict[str, dict[str, Any]] = {}
    for dev in devices:
        pci = dev.get("pci_address")
        if pci and dev["name"].startswith(("mlx5_", "mlx4_")):
            cards.setdefault(pci.rsplit(".", 1)[0], dev)
    out: list[dict[str, Any]] = []
    tools = ["mlxconfig", "mstconfig"]
    for dev in cards.values():
        while tools:
            result = host.run([tools[0], "-d", dev["pci_address"], "q", "PCI_WR_ORDERING"],
                              timeout=MLXCONFIG_TIMEOUT_S)
            if result.returncode is None and not result.timed_out:
                tools.pop(0)  # not installed: try the next tool
                continue
            break
        if not tools:
            return out
        if not result.ok:
            errors.append(result.why_failed())  # no root, no access: the others fail alike
            return out
        value = setting(parse_mlxconfig(result.stdout), "PCI_WR_ORDERING")
        if value["basis"] is None:
            continue
        out.append({"device": dev["name"], "pci_address": dev["pci_address"], "tool": tools[0],
                    **value})
    return out
