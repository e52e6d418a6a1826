"""Dedicated terminal views for the probe's sections: the few columns an engineer looks at first.

Each view takes a section's ``data`` and returns rich renderables. The full detail is always in
``--json``. A view that meets data it does not expect raises, and :mod:`ncclcheck.render.facts`
falls back to the generic view, so odd data never breaks the output.

Tables fit an 80-column terminal (or ``| less``) without losing a value: short cells (states,
numbers, bus ids) never shrink below their width, long ones (names, paths, addresses) wrap, and
the GPU/NIC matrix drops its NIC columns when it is too wide (the NIC rows keep the GPU/NIC
distances).
"""

from __future__ import annotations

from typing import Any, Callable

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from ncclcheck.render.units import Breakable, human_bytes, yes_no


def grid(rows: list[tuple[str, Any]]) -> Table:
    """A two-column key/value grid; values are plain text (never markup)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(Text(key), value if isinstance(value, (Text, Breakable))
                      else Text("-" if value is None else str(value)))
    return table


def _cell(value: Any) -> Any:
    if isinstance(value, (Text, Breakable)):
        return value
    return Text("-" if value is None else str(value))


def _plain(cell: Any) -> str:
    return cell.text if isinstance(cell, Breakable) else cell.plain


def table(title: str, columns: list[str], rows: list[list[Any]],
          wrap: tuple[str, ...] = ()) -> "Fit":
    """A compact table with plain-text cells; only the columns in ``wrap`` may wrap.

    A column that may not wrap is never narrower than its widest line, so a narrow terminal
    wraps the ``wrap`` columns instead of cutting a number short; a :class:`Breakable` cell
    (a path, a list of names) wraps only after a separator, so its column is never narrower
    than its longest part. Where even that does not fit, each row is shown as a block of
    ``column  value`` lines (see :class:`Fit`).
    """
    out = Table(title=title, title_justify="left", show_edge=False, pad_edge=False,
                title_style="bold", box=box.SIMPLE_HEAD, collapse_padding=True)
    cells = [[_cell(c) for c in row] for row in rows]
    minimum = 2 * (len(columns) - 1)  # two spaces between columns
    for k, col in enumerate(columns):
        lines = [col] + [line for row in cells if k < len(row)
                         for line in _plain(row[k]).splitlines()]
        widest = max(len(line) for line in lines)
        column = [row[k] for row in cells if k < len(row)]
        parts = [c.least for c in column if isinstance(c, Breakable)]
        if col in wrap and column and len(parts) == len(column):  # wraps after separators
            least = max([len(col), *parts])
        elif col in wrap:
            least = max([min(widest, max(len(col), 8)), *parts])
        if col in wrap:
            out.add_column(Text(col), overflow="fold", min_width=least)
        else:
            least = widest
            out.add_column(Text(col), no_wrap=True, min_width=least)
        minimum += least
    for row in cells:
        out.add_row(*row)
    return Fit(out, title, columns, cells, minimum)


class Fit:
    """A table where it fits; else one block of ``column  value`` lines per row, so that a
    narrow terminal never crops a value or squeezes a column to nothing."""

    def __init__(self, table: Table, title: str, columns: list[str], rows: list[list[Text]],
                 minimum: int) -> None:
        self.table, self.title, self.columns, self.rows = table, title, columns, rows
        self.minimum = minimum

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.minimum <= options.max_width:
            yield self.table
            return
        yield Text(self.title, style="bold")
        for row in self.rows:
            yield grid([(col, cell) for col, cell in zip(self.columns, row)])
            yield Text("")


class Matrix:
    """``nvidia-smi topo -m`` as text; without its NIC columns when the terminal is too narrow.

    The matrix is symmetric, so the NIC rows still show every GPU/NIC distance. Both forms are
    built here, so that odd data raises in the view (and gets the generic view), not at print.
    """

    def __init__(self, labels: list[str], names: list[str], matrix: list[list[Any]]) -> None:
        self.labels = [str(label) for label in labels]
        self.names = [str(name) for name in names]
        self.matrix = [list(row) for row in matrix]
        every = list(range(len(self.labels)))
        gpus = [k for k in every if self.labels[k].startswith("GPU")]
        self.full = self.lines(every)
        self.gpu_only = self.lines(gpus) if gpus and len(gpus) < len(every) else None

    def lines(self, keep: list[int]) -> list[str]:
        """The matrix with only the columns in ``keep``."""
        width = max(5, *(len(self.labels[k]) + 1 for k in keep))
        out = [" " * 12 + "".join(f"{self.labels[k]:>{width}}" for k in keep)]
        for name, row in zip(self.names, self.matrix):
            out.append(f"{name[:11]:<12}" + "".join(
                f"{str(row[k]) if k < len(row) else '?':>{width}}" for k in keep))
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines, title = self.full, "topology (nvidia-smi topo -m):"
        if self.gpu_only and max(len(line) for line in lines) > options.max_width:
            lines = self.gpu_only
            title = "topology (nvidia-smi topo -m; NIC columns in --json or a wider terminal):"
        yield Text("\n".join([title, *lines]), no_wrap=True, overflow="crop")


def _numa(nodes: Any) -> str | None:
    """``1`` on a one-node box (never ``0``, its id), ``2 (0, 1)`` with more.

    >>> _numa([0]), _numa([0, 1]), _numa([])
    ('1', '2 (0, 1)', None)
    """
    if not isinstance(nodes, list) or not nodes:
        return None
    return str(len(nodes)) + (f" ({', '.join(map(str, nodes))})" if len(nodes) > 1 else "")


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
        ("NUMA nodes", _numa(d.get("numa_nodes"))),
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
                                  "PCIe now/max", "NVLinks", "ECC", "MIG"], rows,
                         wrap=("name",)))
    topo = d.get("topology") or {}
    labels, matrix = topo.get("labels") or [], topo.get("matrix") or []
    if labels and matrix:
        nics = topo.get("nics") or {}
        out.append(Matrix(labels, [nics.get(label) or label for label in labels], matrix))
    return out


def cuda_view(d: dict[str, Any]) -> list[Any]:
    """CUDA toolkits (version.json) and runtime libraries (libcudart), as collect_env shows."""
    rows: list[tuple[str, Any]] = []
    for t in d.get("toolkits") or []:
        text = t.get("version") or "version unknown"
        if t.get("cudart_version"):
            text += f" (cudart {t['cudart_version']})"
        aliases = ", ".join(t.get("aliases") or [])
        rows.append((f"toolkit {t.get('path')}" + (f" ({aliases})" if aliases else ""), text))
    for r in d.get("runtimes") or []:
        rows.append((f"runtime {r.get('path')}",
                     f"libcudart {r.get('version') or '?'} ({r.get('found_via')})"))
    return [grid(rows) if rows else Text("no CUDA toolkit or runtime", style="dim")]


def nccl_view(d: dict[str, Any]) -> list[Any]:
    """Every libnccl with its version, which one torch loads, plugins, verbs, config files."""
    loads = d.get("torch_loads") or {}
    rows = []
    for lib in d.get("libraries") or []:
        mark = Text("torch", style="bold green") if loads.get("path") in (
            lib.get("path"), lib.get("realpath")) else Text("")
        rows.append([lib.get("version") or Text(lib.get("error") or "?", style="red"),
                     Breakable(lib.get("path")), Breakable(", ".join(lib.get("found_via") or [])),
                     mark])
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
        ("torch loads", Breakable(f"{loads.get('version')} {loads.get('path')}")
         if loads.get("path") else (loads.get("reason") or "-")),
        ("net plugins", Breakable(", ".join(p.get("path", "?") for p in d.get("net_plugins") or [])
                                  or "none")),
        ("libibverbs", (Breakable(f"loads {verbs.get('path')}") if verbs.get("loaded")
                        else f"does not load: {verbs.get('error') or '?'}") if verbs else "-"),
        ("verbs providers", ", ".join(filter(None, providers)) or "-"),
        ("config files", Breakable(", ".join(c.get("path", "?")
                                             for c in d.get("config_files") or []) or "none")),
    ]))
    return out


def network_view(d: dict[str, Any]) -> list[Any]:
    """One row per interface: kind, state and speed, MTU, addresses, PCI/NUMA, notes."""
    rows = []
    for i in d.get("interfaces") or []:
        state = i.get("operstate") or "?"
        style = "green" if state == "up" else ("dim" if i.get("kind") == "loopback" else "yellow")
        speed = i.get("speed_mbps")
        if isinstance(speed, (int, float)) and speed > 0:
            state += f" {speed / 1000:g}G"
        notes = [note for note in ("default route" if i.get("default_route") else None,
                                   f"in {i['master']}" if i.get("master") else None) if note]
        rows.append([
            i.get("name"), Text(state, style=style), i.get("mtu"),
            "\n".join(f"{a.get('address')}/{a.get('prefix')}" for a in i.get("ipv4") or []),
            " ".join(str(x) for x in (i.get("pci_address"), i.get("numa_node")) if x is not None),
            Breakable(", ".join([str(i.get("kind")), *notes]), spaces=False),
        ])
    # names, addresses and PCI ids are never split; the kind and notes wrap after a comma
    return [table("Interfaces", ["name", "state", "MTU", "IPv4", "PCI NUMA", "kind, notes"],
                  rows, wrap=("kind, notes",))]


def ib_view(d: dict[str, Any]) -> list[Any]:
    """One row per RDMA port, then /dev/infiniband and GPUDirect RDMA."""
    rows = []
    for dev in d.get("devices") or []:
        for p in dev.get("ports") or []:
            state = p.get("state") or "?"
            rows.append([f"{dev.get('name')}:{p.get('port')}",
                         Text(state, style="green" if state == "ACTIVE" else "yellow"),
                         p.get("rate_gbps") and f"{p.get('rate_gbps'):g} Gb/s",
                         {"Ethernet": "RoCE", "InfiniBand": "IB"}.get(p.get("link_layer") or "",
                                                                       p.get("link_layer")),
                         p.get("netdev"), p.get("roce_v2_ipv4_gid_index"),
                         dev.get("pci_address"), dev.get("numa_node")])
    gdr = d.get("gdr") or {}
    devs = d.get("dev_infiniband") or {}
    extra = [(f"QoS {q.get('netdev')}", f"{q.get('trust')} trust, PFC on "
              + (",".join(map(str, q.get("pfc_enabled") or [])) or "no priority"))
             for q in d.get("qos") or []]
    extra += [(f"PCI_WR_ORDERING {o.get('device')}", str(o.get("current")))
              for o in d.get("pci_ordering") or []]
    return [table("RDMA ports", ["port", "state", "rate", "link", "netdev", "GID", "PCI",
                                 "NUMA"], rows),
            Text("GID: the index of the RoCE v2 IPv4 GID, NCCL's default since 2.21 "
                 "(NCCL_IB_GID_INDEX before)", style="dim"),
            grid([("/dev/infiniband", "visible" if devs.get("visible") else "not visible"),
                  ("GPUDirect RDMA", Text(("ready" if gdr.get("ready") else "not ready"
                                           if gdr.get("ready") is False else "unknown")
                                          + (f": {gdr.get('reason')}" if gdr.get("reason")
                                             else ""),
                                          style="green" if gdr.get("ready") else "yellow")),
                  *extra])]


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


# netpath and platform: render/sections_net.py (NET_VIEWS), which builds on grid and table here
VIEWS: dict[str, Callable[[dict[str, Any]], list[Any]]] = {
    "host": host_view, "gpu": gpu_view, "cuda": cuda_view, "nccl": nccl_view, "network": network_view,
    "ib": ib_view, "limits": limits_view, "env": env_view,
}
