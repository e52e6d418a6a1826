"""The nodes from facts documents: the cluster table, each node's GPUs, ports and NICs, outliers."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.report.cells import cross_marks, human_bytes, table, text

#: Interface kinds that carry NCCL traffic (see probes/network/__init__.py KINDS).
DATA_NIC_KINDS = ("physical", "bond", "vlan", "ipoib")
#: Most nodes that get GPU, port and NIC tables (all of them up to a quarter of this).
MAX_DETAILED = 32
MAX_DIFFERENCES = 200


def section_data(facts: dict[str, Any], name: str) -> dict[str, Any]:
    """A section's data when the probe ran ok, else ``{}``."""
    sec = (facts.get("sections") or {}).get(name) or {}
    data = sec.get("data") if sec.get("status") == "ok" else None
    return data if isinstance(data, dict) else {}


def items(value: Any) -> list[dict[str, Any]]:
    """The objects of a list in a document (a null or other stray item is skipped).

    >>> items([{"a": 1}, None, 3]), items(None)
    ([{'a': 1}], [])
    """
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def hostname_of(facts: dict[str, Any]) -> str:
    """The node's name in a facts document."""
    return str(facts.get("hostname") or section_data(facts, "host").get("hostname") or "unknown")


def collect_nodes(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Facts documents from facts and cluster inputs (one per host, newest kept), and failures."""
    by_host: dict[str, dict[str, Any]] = {}
    failed: list[dict[str, str]] = []
    for d in docs:
        if d["kind"] == "facts":
            found = [d["doc"]]
        elif d["kind"] == "cluster":
            found = list(d["doc"].get("nodes") or [])
            failed.extend({"host": str(f.get("host") or "?"), "reason": str(f.get("reason") or "")}
                          for f in d["doc"].get("failed") or [] if isinstance(f, dict))
        else:
            continue
        for facts in found:
            host = hostname_of(facts)
            old = by_host.get(host)
            if old is None or str(facts.get("collected_at") or "") >= str(old.get("collected_at")
                                                                           or ""):
                by_host[host] = facts
    return list(by_host.values()), failed


def gpu_summary(gpu: dict[str, Any]) -> str | None:
    """``8 x H100 80GB HBM3`` from the gpu section.

    >>> gpu_summary({"count": 2, "gpus": [{"name": "NVIDIA A100-SXM4-40GB"}] * 2})
    '2 x A100-SXM4-40GB'
    >>> gpu_summary({}) is None, gpu_summary({"count": 0, "gpus": []})
    (True, 'none')
    """
    if not gpu:
        return None
    gpus = items(gpu.get("gpus"))
    count = gpu.get("count", len(gpus))
    if not count:
        return "none"
    names = Counter(str(g.get("name") or "GPU").replace("NVIDIA ", "") for g in gpus)
    if not names:
        return f"{count} GPUs"
    return " + ".join(f"{n} x {name}" for name, n in names.most_common())


def data_nics(network: dict[str, Any]) -> list[dict[str, Any]]:
    """Interfaces that can carry NCCL traffic: no loopback, docker or bridges, and a veth only
    where it holds an IPv4 address and is in no bridge (a container's or pod's eth0; the host
    side of a container's pair has none).

    >>> [i["name"] for i in data_nics({"interfaces": [
    ...     {"name": "eth0", "kind": "veth", "ipv4": [{"address": "198.18.0.11"}]},
    ...     {"name": "veth1", "kind": "veth", "ipv4": [], "master": "docker0"},
    ...     {"name": "ens1", "kind": "physical"}]})]
    ['eth0', 'ens1']
    """
    return [i for i in items(network.get("interfaces")) if i.get("kind") in DATA_NIC_KINDS
            or (i.get("kind") == "veth" and i.get("ipv4") and not i.get("master"))]


def rdma_summary(ib: dict[str, Any]) -> tuple[str | None, str]:
    """``8 of 12 active: 8 x 400 Gb/s IB`` and a tooltip listing every port.

    >>> rdma_summary({"devices": [{"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE",
    ...   "rate_gbps": 400, "link_layer": "InfiniBand"}]}, {"name": "mlx5_1", "ports": [
    ...   {"port": 1, "state": "DOWN", "rate_gbps": 10, "link_layer": "InfiniBand"}]}]})[0]
    '1 of 2 active: 1 x 400 Gb/s IB'
    """
    ports = [(d.get("name"), p) for d in items(ib.get("devices")) for p in items(d.get("ports"))]
    if not ports:
        return (None, "") if not ib else ("no RDMA ports", "")
    active = [(n, p) for n, p in ports if p.get("state") == "ACTIVE"]
    kinds = Counter(f"{text(p.get('rate_gbps'))} Gb/s "
                    f"{'RoCE' if p.get('link_layer') == 'Ethernet' else 'IB'}"
                    for _, p in active)
    rates = ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items()))
    detail = "; ".join(f"{n}:{p.get('port')} {p.get('state') or '?'} {p.get('rate') or ''}".strip()
                       for n, p in ports)
    return f"{len(active)} of {len(ports)} active" + (f": {rates}" if rates else ""), detail


def node_row(facts: dict[str, Any]) -> dict[str, Any]:
    """One node's row of the cluster table, with tooltips."""
    host, gpu, nccl = (section_data(facts, n) for n in ("host", "gpu", "nccl"))
    network, ib, limits = (section_data(facts, n) for n in ("network", "ib", "limits"))
    nics = data_nics(network)
    up = [i for i in nics if i.get("operstate") == "up"]
    rdma, rdma_detail = rdma_summary(ib)
    gdr = ib.get("gdr") or {}
    shm, memlock = limits.get("shm") or {}, limits.get("memlock") or {}
    torch = nccl.get("torch") or {}
    torch_loads = nccl.get("torch_loads") or {}
    row = {
        "host": hostname_of(facts),
        "gpus": gpu_summary(gpu),
        "driver": (f"{gpu.get('driver_version') or '?'} / "
                   f"CUDA {gpu.get('cuda_driver_version') or '?'}" if gpu else None),
        "nccl": nccl.get("versions") or ("none found" if nccl else None),
        "torch": (None if not torch else f"{torch.get('version') or '?'}"
                  + (f" (loads NCCL {torch_loads['version']})" if torch_loads.get("version")
                     else "")),
        "kernel": host.get("kernel"),
        "nics": f"{len(up)} of {len(nics)} up" if network else None,
        "mtu": sorted({i.get("mtu") for i in up if i.get("mtu")}) or None,
        "rdma": rdma,
        "gdr": (None if not ib or gdr.get("ready") is None
                else "ready" if gdr.get("ready") else "not ready"),
        "shm": human_bytes(shm.get("size_bytes")) if shm.get("size_bytes") else None,
        "memlock": ("unlimited" if memlock.get("unlimited")
                    else human_bytes(memlock.get("soft_bytes"))
                    if memlock.get("soft_bytes") is not None else None),
        "_titles": {"rdma": rdma_detail, "gdr": gdr.get("reason", ""),
                    "nics": "; ".join(f"{i.get('name')} {i.get('operstate')}" for i in nics),
                    "torch": (torch_loads.get("reason") or "") if torch_loads else "",
                    "host": f"collected {facts.get('collected_at') or '?'}"},
    }
    return row


NODE_COLUMNS = [("host", "node"), ("gpus", "GPUs"), ("driver", "driver"), ("nccl", "libnccl"),
                ("torch", "torch"), ("kernel", "kernel"), ("nics", "data NICs"), ("mtu", "MTU"),
                ("rdma", "RDMA ports"), ("gdr", "GPUDirect RDMA"), ("shm", "/dev/shm"),
                ("memlock", "memlock")]


def gpu_rows(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-GPU rows of one node."""
    rows = []
    for g in items(gpu.get("gpus")):
        pcie = g.get("pcie") if isinstance(g.get("pcie"), dict) else {}
        links = None if g.get("nvlinks") is None else items(g.get("nvlinks"))
        width = (f"x{pcie.get('width_current') or '?'}"
                 + ("" if pcie.get("width_current") == pcie.get("width_max")
                    else f" of x{text(pcie.get('width_max'))}"))
        rows.append({
            "index": g.get("index"), "name": (g.get("name") or "").replace("NVIDIA ", "") or None,
            "bus": g.get("pci_bus_id"), "numa": g.get("numa_node"),
            "pcie": f"gen{pcie.get('gen_max') or '?'} {width}" if pcie else None,
            "nvlink": (None if links is None else
                       f"{sum(1 for n in links if n.get('active'))} of {len(links)} active"),
            "memory": human_bytes(g.get("memory_total_bytes")),
            "ecc": g.get("ecc_enabled"), "mig": g.get("mig_mode"),
            "persistence": g.get("persistence_mode"),
        })
    return rows


def port_rows(ib: dict[str, Any]) -> list[dict[str, Any]]:
    """Every RDMA port of one node."""
    return [{"port": f"{dev.get('name')}:{p.get('port')}", "state": p.get("state"),
             "rate": p.get("rate"), "layer": p.get("link_layer"), "netdev": p.get("netdev"),
             "numa": dev.get("numa_node"), "gid": p.get("roce_v2_ipv4_gid_index"),
             "fw": dev.get("fw_ver")}
            for dev in items(ib.get("devices")) for p in items(dev.get("ports"))]


def nic_rows(network: dict[str, Any]) -> list[dict[str, Any]]:
    """Data-plane interfaces of one node."""
    return [{"name": i.get("name"), "kind": i.get("kind"), "state": i.get("operstate"),
             "speed": (f"{i['speed_mbps'] // 1000} Gb/s" if isinstance(i.get("speed_mbps"), int)
                       and i["speed_mbps"] >= 1000 else text(i.get("speed_mbps"))),
             "mtu": i.get("mtu"), "numa": i.get("numa_node"), "driver": i.get("driver"),
             "master": i.get("master"),
             "ipv4": [f"{a.get('address')}/{a.get('prefix')}" for a in items(i.get("ipv4"))],
             "route": i.get("default_route")}
            for i in data_nics(network)]


#: Per-node detail tables: (name, row key, columns, compared across nodes, compared within a
#: node). GPUs of one node should match each other; ports and NICs only their peers elsewhere.
DETAILS = (
    ("gpus", "index", [("index", "#"), ("name", "model"), ("bus", "PCI bus"), ("numa", "NUMA"),
                       ("pcie", "PCIe (max gen, width)"), ("nvlink", "NVLink"),
                       ("memory", "memory"), ("ecc", "ECC"), ("mig", "MIG"),
                       ("persistence", "persistence")],
     ["name", "bus", "pcie", "nvlink", "memory", "ecc", "mig", "persistence"],
     ["name", "pcie", "nvlink", "memory", "ecc", "mig"]),
    ("ports", "port", [("port", "port"), ("state", "state"), ("rate", "rate"),
                       ("layer", "link layer"), ("netdev", "netdev"), ("numa", "NUMA"),
                       ("gid", "RoCE v2 GID"), ("fw", "firmware")],
     ["state", "rate", "layer", "netdev", "numa", "gid", "fw"], []),
    ("nics", "name", [("name", "interface"), ("kind", "kind"), ("state", "state"),
                      ("speed", "speed"), ("mtu", "MTU"), ("numa", "NUMA"), ("driver", "driver"),
                      ("master", "master"), ("ipv4", "IPv4"), ("route", "default route")],
     ["kind", "state", "speed", "mtu", "driver", "master", "route"], []),
)


def gaps(facts: dict[str, Any]) -> list[dict[str, str]]:
    """Sections that did not produce data on a node, and why."""
    out = []
    for name, sec in (facts.get("sections") or {}).items():
        if isinstance(sec, dict) and sec.get("status") != "ok":
            out.append({"section": name, "status": str(sec.get("status") or "?"),
                        "reason": "; ".join(map(str, sec.get("errors") or [])) or "-"})
    return out


def node_views(nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cluster table (one row per node) and each node's GPU, port and NIC tables.

    With several nodes, a detail cell is an outlier when it differs from the same GPU, port or
    interface on most other nodes; with one node, when a GPU differs from the node's other GPUs
    or a port is in a state its siblings are not.
    """
    if not nodes:
        return None
    rows = [node_row(f) for f in nodes]
    flag = [k for k, _ in NODE_COLUMNS if k != "host"] if len(nodes) > 1 else []
    sources = {"gpus": [gpu_rows(section_data(f, "gpu")) for f in nodes],
               "ports": [port_rows(section_data(f, "ib")) for f in nodes],
               "nics": [nic_rows(section_data(f, "network")) for f in nodes]}
    tables: dict[str, list[dict[str, Any] | None]] = {}
    for name, key, columns, across, within in DETAILS:
        marks = cross_marks(sources[name], key, across)
        inside = within if len(nodes) > 1 else within or ["state"]
        tables[name] = [table(columns, node_rows, flag=inside, marks=m) if node_rows else None
                        for node_rows, m in zip(sources[name], marks)]
    details = []
    shown = detailed(nodes, tables)
    for n, facts in enumerate(nodes):
        if n not in shown:
            continue
        details.append({
            "host": hostname_of(facts),
            "collected_at": str(facts.get("collected_at") or "-"),
            "os": text(section_data(facts, "host").get("os")),
            "gpus": tables["gpus"][n], "ports": tables["ports"][n], "nics": tables["nics"][n],
            "gaps": gaps(facts),
        })
    return {"table": table(NODE_COLUMNS, rows, flag=flag), "details": details,
            "differences": differences(details)[:MAX_DIFFERENCES],
            "details_left_out": len(nodes) - len(details)}


def detailed(nodes: list[dict[str, Any]], tables: dict[str, list[Any]]) -> set[int]:
    """Which nodes get detail tables: all of a small cluster; in a large one the nodes with an
    outlier or a section that failed, and the first node as the reference, at most
    :data:`MAX_DETAILED`."""
    if len(nodes) <= MAX_DETAILED // 4:
        return set(range(len(nodes)))
    odd = [n for n in range(len(nodes))
           if gaps(nodes[n]) or any(t[n] and t[n]["outliers"] for t in tables.values())]
    return set(([0] + odd)[:MAX_DETAILED])


DETAIL_LABELS = {"gpus": "GPU", "ports": "port", "nics": "interface"}


def differences(details: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One line per detail row with outlier cells: ``h100-node-02 port mlx5_5:1: state DOWN``."""
    out = []
    for d in details:
        for name, label in DETAIL_LABELS.items():
            t = d[name]
            if not t:
                continue
            for row in t["rows"]:
                odd = [f"{col['label']} {cell['text']}"
                       for col, cell in zip(t["columns"][1:], row["cells"][1:]) if cell["outlier"]]
                if odd or row["cells"][0]["outlier"]:
                    out.append({"host": d["host"], "what": f"{label} {row['cells'][0]['text']}",
                                "detail": ", ".join(odd) or "only on this node"})
    return out


def expected_transport(nodes: list[dict[str, Any]]) -> str:
    """What the probe suggests NCCL will pick (IB where an RDMA port is active, else Socket),
    when no run says what it did use.

    >>> expected_transport([{"hostname": "a", "sections": {"ib": {"status": "unavailable"}}}])
    'expected (not measured): Socket on a'
    """
    if not nodes:
        return "-"
    by_kind: dict[str, list[str]] = {}
    for facts in nodes:
        layers = {p.get("link_layer") for dev in items(section_data(facts, "ib").get("devices"))
                  for p in items(dev.get("ports")) if p.get("state") == "ACTIVE"}
        kind = ("Socket" if not layers else "IB over RoCE" if layers == {"Ethernet"}
                else "IB" if layers == {"InfiniBand"} else "IB (InfiniBand and RoCE ports)")
        by_kind.setdefault(kind, []).append(hostname_of(facts))
    if len(by_kind) == 1 and len(nodes) > 1:
        return f"expected (not measured): {next(iter(by_kind))} on all {len(nodes)} nodes"
    return "expected (not measured): " + "; ".join(
        f"{kind} on {', '.join(hosts)}" for kind, hosts in by_kind.items())
