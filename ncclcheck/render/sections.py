"""Dedicated terminal views for the probe's sections: the few columns an engineer looks at first.

Each view takes a section's ``data`` and returns rich renderables. The full detail is always in
``--json``. A view that meets data it does not expect raises, and :mod:`ncclcheck.render.facts`
falls back to the generic view, so odd data never breaks the output.
"""

from __future__ import annotations

from typing import Any, Callable

from rich.table import Table
from rich.text import Text

from ncclcheck.render.units import human_bytes, yes_no


def grid(rows: list[tuple[str, Any]]) -> Table:
    """A two-column key/value grid; values are plain text (never markup)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(Text(key), value if isinstance(value, Text) else Text("-" if value is None
                                                                          else str(value)))
    return table


def table(title: str, columns: list[str], rows: list[list[Any]],
          wrap: tuple[str, ...] = ()) -> Table:
    """A compact table with plain-text cells; only the columns in ``wrap`` may wrap."""
    out = Table(title=title, title_justify="left", show_edge=False, pad_edge=False,
                title_style="bold")
    for col in columns:
        out.add_column(Text(col), overflow="fold", no_wrap=col not in wrap)
    for row in rows:
        out.add_row(*(c if isinstance(c, Text) else Text("-" if c is None else str(c))
                      for c in row))
    return out


def host_view(d: dict[str, Any]) -> list[Any]:
    """Host identity, container and launcher."""
    container = d.get("container") or {}
    launcher = d.get("launcher") or {}
    launch = launcher.get("kind")
    if launch:
        launch += "".join(f"  {k}={launcher[k]}" for k in ("rank", "world_size", "nnodes",
                                                            "master_addr") if launcher.get(k)
                          is not None)
    return [grid([
        ("hostname", d.get("hostname")), ("os", d.get("os")), ("kernel", d.get("kernel")),
        ("cpu", f"{d.get('cpu_model') or '?'} x {d.get('cpu_count') or '?'}"),
        ("numa nodes", ", ".join(map(str, d.get("numa_nodes") or [])) or None),
        ("memory", human_bytes(d.get("memory_total_bytes"))),
        ("container", container.get("runtime") or "none"),
        ("launcher", launch or "none"),
    ])]


def gpu_view(d: dict[str, Any]) -> list[Any]:
    """Driver line, one row per GPU, then the topology matrix."""
    out: list[Any] = [grid([
        ("driver", f"{d.get('driver_version') or '?'} (CUDA {d.get('cuda_driver_version') or '?'})"
                   f" via {d.get('source') or '?'}"),
        ("GPUs", d.get("count")),
        ("P2P between all GPUs", yes_no(d.get("p2p_all_supported"))),
        ("NVLink between all GPUs", yes_no(d.get("nvlink_all_pairs"))),
    ])]
    rows = []
    for g in d.get("gpus") or []:
        pcie = g.get("pcie") or {}
        links = g.get("nvlinks")
        active = None if links is None else sum(1 for link in links if link.get("active"))
        rows.append([g.get("index"), g.get("name"), g.get("pci_bus_id"), g.get("numa_node"),
                     human_bytes(g.get("memory_total_bytes")),
                     f"gen{pcie.get('gen_current')}/{pcie.get('gen_max')} "
                     f"x{pcie.get('width_current')}/{pcie.get('width_max')}",
                     active, yes_no(g.get("ecc_enabled")), yes_no(g.get("mig_mode"))])
    if rows:
        out.append(table("GPUs", ["#", "name", "bus id", "NUMA", "memory",
                                  "PCIe now/max", "NVLinks up", "ECC", "MIG"], rows,
                         wrap=("name",)))
    topo = d.get("topology") or {}
    labels, matrix = topo.get("labels") or [], topo.get("matrix") or []
    if labels and matrix:
        nics = topo.get("nics") or {}
        names = [nics.get(label, label) for label in labels]
        width = max(5, *(len(n) + 1 for n in labels))
        lines = ["topology (nvidia-smi topo -m):", " " * 12 + "".join(f"{n:>{width}}" for n in labels)]
        for name, row in zip(names, matrix):
            lines.append(f"{str(name)[:11]:<12}" + "".join(f"{str(c):>{width}}" for c in row))
        out.append(Text("\n".join(lines), no_wrap=True, overflow="crop"))
    return out


def nccl_view(d: dict[str, Any]) -> list[Any]:
    """Every libnccl with its version, which one torch loads, plugins, verbs, config files."""
    loads = d.get("torch_loads") or {}
    rows = []
    for lib in d.get("libraries") or []:
        mark = Text("torch", style="bold green") if loads.get("path") in (
            lib.get("path"), lib.get("realpath")) else Text("")
        rows.append([lib.get("version") or Text(lib.get("error") or "?", style="red"),
                     lib.get("path"), ", ".join(lib.get("found_via") or []), mark])
    out: list[Any] = []
    if rows:
        out.append(table("NCCL libraries", ["version", "path", "found via", "loaded by"], rows,
                         wrap=("path", "found via")))
    else:
        out.append(Text("no libnccl found", style="yellow"))
    torch = d.get("torch") or {}
    verbs = d.get("ibverbs") or {}
    providers = [p.get("name") for p in verbs.get("providers") or [] if p.get("loaded")]
    out.append(grid([
        ("torch", f"{torch.get('version')} (CUDA {torch.get('cuda') or 'none'})" if torch
         else "not installed"),
        ("torch loads", f"{loads.get('version')} {loads.get('path')}" if loads.get("path")
         else (loads.get("reason") or "-")),
        ("net plugins", ", ".join(p.get("path", "?") for p in d.get("net_plugins") or [])
         or "none"),
        ("libibverbs", (f"loads ({verbs.get('path')})" if verbs.get("loaded")
                        else f"does not load: {verbs.get('error') or '?'}") if verbs else "-"),
        ("verbs providers", ", ".join(filter(None, providers)) or "-"),
        ("config files", ", ".join(c.get("path", "?") for c in d.get("config_files") or [])
         or "none"),
    ]))
    return out


def network_view(d: dict[str, Any]) -> list[Any]:
    """One row per interface: kind, state, MTU, speed, addresses, PCI/NUMA, default route."""
    rows = []
    for i in d.get("interfaces") or []:
        state = i.get("operstate") or "?"
        style = "green" if state == "up" else ("dim" if i.get("kind") == "loopback" else "yellow")
        speed = i.get("speed_mbps")
        rows.append([
            i.get("name"), i.get("kind"), Text(state, style=style), i.get("mtu"),
            f"{speed / 1000:g}G" if isinstance(speed, (int, float)) and speed > 0 else None,
            ", ".join(f"{a.get('address')}/{a.get('prefix')}" for a in i.get("ipv4") or []),
            i.get("master"),
            " ".join(str(x) for x in (i.get("pci_address"), i.get("numa_node")) if x is not None),
            "default" if i.get("default_route") else "",
        ])
    return [table("Interfaces", ["name", "kind", "state", "MTU", "speed", "IPv4", "master",
                                 "PCI NUMA", "route"], rows, wrap=("IPv4",))]


def ib_view(d: dict[str, Any]) -> list[Any]:
    """One row per RDMA port, then /dev/infiniband and GPUDirect RDMA."""
    rows = []
    for dev in d.get("devices") or []:
        for p in dev.get("ports") or []:
            state = p.get("state") or "?"
            rows.append([f"{dev.get('name')}:{p.get('port')}",
                         Text(state, style="green" if state == "ACTIVE" else "yellow"),
                         p.get("rate_gbps") and f"{p.get('rate_gbps'):g} Gb/s",
                         "RoCE" if p.get("link_layer") == "Ethernet" else p.get("link_layer"),
                         p.get("netdev"), p.get("roce_v2_ipv4_gid_index"),
                         dev.get("pci_address"), dev.get("numa_node")])
    gdr = d.get("gdr") or {}
    devs = d.get("dev_infiniband") or {}
    return [table("RDMA ports", ["port", "state", "rate", "link", "netdev", "RoCEv2 IPv4 GID",
                                 "PCI", "NUMA"], rows, wrap=("netdev",)),
            grid([("/dev/infiniband", "visible" if devs.get("visible") else "not visible"),
                  ("GPUDirect RDMA", Text(("ready" if gdr.get("ready") else "not ready"
                                           if gdr.get("ready") is False else "unknown")
                                          + (f": {gdr.get('reason')}" if gdr.get("reason")
                                             else ""),
                                          style="green" if gdr.get("ready") else "yellow"))])]


def limits_view(d: dict[str, Any]) -> list[Any]:
    """/dev/shm, memlock and open files in human units."""
    shm = d.get("shm") or {}
    mem = d.get("memlock") or {}
    nofile = d.get("open_files") or {}
    return [grid([
        ("/dev/shm", f"{human_bytes(shm.get('size_bytes'))} ({human_bytes(shm.get('free_bytes'))}"
                     " free)"),
        ("memlock", "unlimited" if mem.get("unlimited") else
         f"{human_bytes(mem.get('soft_bytes'))} soft, {human_bytes(mem.get('hard_bytes'))} hard"),
        ("open files", f"{nofile.get('soft')} soft, {nofile.get('hard')} hard"),
    ])]


def env_view(d: dict[str, Any]) -> list[Any]:
    """The allow-listed variables, NCCL's first."""
    rows = [(k, v) for family in ("nccl", "torch_nccl", "other") for k, v in
            sorted((d.get(family) or {}).items())]
    return [grid(rows) if rows else Text("no NCCL-related variables set", style="dim")]


VIEWS: dict[str, Callable[[dict[str, Any]], list[Any]]] = {
    "host": host_view, "gpu": gpu_view, "nccl": nccl_view, "network": network_view,
    "ib": ib_view, "limits": limits_view, "env": env_view,
}
