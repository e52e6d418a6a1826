"""Render bench documents: the nccl-tests table, the summary, the --compare table, progress.

The table copies current nccl-tests' layout byte for byte (2.18 and later: ``src/util.cu``
``writeResultHeader``, ``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody`` with its
``getFloatStr`` widths, ``writeResultFooter``), so people can diff it against ``all_reduce_perf``
output, and ``ncclcheck bench --import`` reads it back. Plain text, no colour.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.document import footer_averages, wrong_total

def float_cell(value: float, width: int) -> str:
    """A number as nccl-tests prints time, algbw and busbw (``getFloatStr`` in src/util.cu):
    two decimals while they fit ``width``, then one, then none, then exponent notation.

    >>> float_cell(4366.46, 7), float_cell(14977.06, 7), float_cell(135.83, 7), float_cell(0.004, 6)
    ('4366.46', '14977.1', ' 135.83', '  0.00')
    >>> float_cell(338.82, 6), float_cell(1234.5, 6), float_cell(123456.0, 6), float_cell(5e7, 6)
    ('338.82', '1234.5', '123456', ' 5e+07')
    """
    power, bound = 0, 1
    while value >= bound:
        power += 1
        bound *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def fmt_half(cell: dict[str, Any] | None) -> str:
    """One placement's cells (time, algbw, busbw, #wrong) as nccl-tests'
    ``writeBenchmarkLineBody``; N/A where a placement was not measured."""
    if not cell:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}    N/A"
    wrong = cell.get("wrong")
    head = (f"  {float_cell(cell['time_us'], 7)}  {float_cell(cell['algbw_gbps'], 6)}  "
            f"{float_cell(cell['busbw_gbps'], 6)}")
    return head + ("    N/A" if wrong is None else f"  {wrong:6g}")


def format_row(row: dict[str, Any]) -> str:
    """One table row, as nccl-tests (2.18 and later) prints it.

    Recorded row (nccl-tests 2.18.0, eunomia-bpf/nccl-eBPF, see tests/fixtures/nccl-tests):

    >>> format_row({"size_bytes": 1048576, "count": 262144, "type": "float", "redop": "sum",
    ...             "root": -1, "out_of_place": {"time_us": 4366.46, "algbw_gbps": 0.24,
    ...             "busbw_gbps": 0.24, "wrong": 0}, "in_place": {"time_us": 4365.21,
    ...             "algbw_gbps": 0.24, "busbw_gbps": 0.24, "wrong": 0}})
    '     1048576        262144     float     sum      -1  4366.46    0.24    0.24       0  4365.21    0.24    0.24       0'
    """
    return (f"{row['size_bytes']:12d}  {row['count']:12d}  {row['type']:>8}  {row['redop']:>6}  "
            f"{row['root']:6d}" + fmt_half(row.get("out_of_place")) + fmt_half(row.get("in_place")))


def table_header() -> list[str]:
    """The three header lines of the result table (nccl-tests ``writeResultHeader``)."""
    lead = "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}"
    cells = "  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} "
    return [
        lead.format("", "", "", "", "") + "           out-of-place                       in-place          ",
        lead.format("size", "count", "type", "redop", "root")
        + cells.format("time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"),
        lead.format("(B)", "(elements)", "", "", "")
        + cells.format("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
    ]


def sweep_line(doc: dict[str, Any]) -> str:
    """nccl-tests' parameter line, from the sweep the document records (else its rows)."""
    sweep = doc.get("sweep") or {}
    sizes = [r["size_bytes"] for r in doc.get("rows") or []]
    low = sweep.get("min_bytes", min(sizes, default=0))
    high = sweep.get("max_bytes", max(sizes, default=0))
    if sweep.get("step_bytes") is not None:
        step = f"{sweep['step_bytes']}(bytes)"
    else:
        factor = sweep.get("step_factor")
        if factor is None and len(sizes) >= 2 and sizes[0] > 0 and sizes[1] % sizes[0] == 0:
            factor = sizes[1] // sizes[0]
        step = f"{factor}(factor)" if factor else "-"
    return (f"# nThread {sweep.get('threads', 1)} nGpus {sweep.get('gpus', 1)} minBytes {low} "
            f"maxBytes {high} step: {step} warmup iters: {doc.get('warmup')} "
            f"iters: {doc.get('iters')} agg iters: 1 validation: {doc.get('check')} graph: 0")


def rank_lines(doc: dict[str, Any]) -> list[str]:
    """``#  Rank  N Group  0 Pid P on HOST device D [bus] NAME`` for every rank known."""
    imported = (doc.get("imported_from") or {}).get("ranks")
    per_rank = imported or ((doc.get("transport") or {}).get("per_rank")) or []
    out = []
    for entry in sorted(per_rank, key=lambda e: e.get("rank") if e.get("rank") is not None else 0):
        if entry.get("rank") is None:
            continue
        device = entry.get("local_rank") if "local_rank" in entry else entry.get("device")
        name = entry.get("gpu") if imported else entry.get("device")
        bus = entry.get("bus_id") or doc.get("backend")
        out.append(f"#  Rank {entry['rank']:2d} Group  0 Pid {entry.get('pid') or 0:6d} on "
                   f"{entry.get('host') or '?':>10} device {device or 0:2d} "
                   f"[{bus}] {name or ''}".rstrip())
    return out


def describe_transport(doc: dict[str, Any]) -> str:
    """One line: what NCCL used (network, interfaces, HCAs, GDR, versions)."""
    info = doc.get("transport") or {}
    if doc.get("backend") == "gloo":
        names = ", ".join(info.get("interfaces") or []) or "default"
        return f"gloo over TCP (interface {names}); NCCL not used"
    if not info:
        return "unknown (no NCCL log)"
    if doc.get("world_size") == 1:
        return (f"none between ranks (1 rank; NCCL set up network "
                f"{info.get('network') or 'unknown'} and sent nothing over it)")
    gdr = info.get("gdr")
    parts = [f"network {info.get('network') or 'unknown'}"]
    if info.get("interfaces"):
        parts.append("interfaces " + ", ".join(info["interfaces"]))
    if info.get("hcas"):
        parts.append("HCAs " + ", ".join(info["hcas"]))
    parts.append("GDR " + ("on" if gdr else "off" if gdr is False else "unknown"))
    versions = info.get("nccl_versions") or []
    if versions:
        parts.append(("NCCL " if len(versions) == 1 else "NCCL versions differ: ")
                     + ", ".join(versions))
    return "; ".join(parts)


#: How the ranks were started, by the document's ``launch.mode``.
ORIGINS = {"local": "ncclcheck started the ranks on this node; no launcher detected",
           "ssh": "ncclcheck started the ranks over ssh; no launcher detected"}


def origin(doc: dict[str, Any]) -> str:
    """Who started the ranks: the launcher detected, or ncclcheck itself (no launcher), or the
    source of an imported document.

    >>> origin({"source": "ncclcheck", "launch": {"mode": "torchrun"}})
    'launched by torchrun'
    >>> origin({"source": "ncclcheck", "launch": {"mode": "local"}})
    'ncclcheck started the ranks on this node; no launcher detected'
    >>> origin({"source": "nccl-tests import"})
    'nccl-tests import'
    """
    launch = doc.get("launch") or {}
    mode = launch.get("mode")
    if mode:
        text = ORIGINS.get(mode, f"launched by {mode}")
        return text + (f"; {launch['note']}" if launch.get("note") else "")
    return str(doc.get("source") or "-")


def run_lines(doc: dict[str, Any], lead: bool = False) -> list[str]:
    """The run's description: backend, ranks, nodes, who started them; versions, time basis."""
    versions = doc.get("versions") or {}
    nodes = doc.get("nodes") or []
    head = f"# ncclcheck bench: {doc.get('op')} {doc.get('dtype')}, " if lead else "# "
    return [f"{head}backend {doc.get('backend')}, {doc.get('world_size')} ranks on {len(nodes)} "
            f"node{'s' if len(nodes) != 1 else ''} ({origin(doc)})",
            f"# torch {versions.get('torch') or '-'}, CUDA {versions.get('cuda') or '-'}, "
            f"NCCL {versions.get('nccl') or '-'}; time: {doc.get('time_basis') or '-'}"]


def footer_lines(doc: dict[str, Any]) -> list[str]:
    """nccl-tests' footer: out-of-bounds count and the average bus bandwidth."""
    rows = doc.get("rows") or []
    wrong = wrong_total(rows)
    avg, _ = footer_averages(rows)
    if doc.get("avg_busbw_gbps") is not None:
        avg = doc["avg_busbw_gbps"]
    return [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
            f"# Avg bus bandwidth    : {avg if avg is not None else 0:g} ", "#"]


def render_table(doc: dict[str, Any]) -> str:
    """The nccl-tests-compatible result table with its header and footer, and bench's summary."""
    lines = [*run_lines(doc, lead=True), sweep_line(doc), "#", "# Using devices",
             *rank_lines(doc), "#", *table_header()]
    lines += [format_row(r) for r in doc.get("rows") or []]
    lines += footer_lines(doc)
    lines += summary_lines(doc)
    return "\n".join(lines) + "\n"


def peak_cell(rows: list[dict[str, Any]]) -> tuple[float, int, str] | None:
    """(peak busbw, its size, which placement) over the rows."""
    best = None
    for row in rows:
        for key, name in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
            cell = row.get(key)
            if cell and (best is None or cell["busbw_gbps"] > best[0]):
                best = (cell["busbw_gbps"], row["size_bytes"], name)
    return best


#: With one rank nothing crosses a link, and NCCL's one-rank sum copies only when the buffers
#: differ (src/device/onerank.cu@v2.28.9-1, ncclLaunchOneRank): torch's all_reduce is in place,
#: so each op is a launch and nothing else. Seen on an H200: 15 us per op at every size, an
#: "algbw" of 8,000 GB/s at 128 MiB, above the memory's own 4.8 TB/s.
ONE_RANK = ("# One rank             : no data moves between ranks; the times are launch overhead, "
            "algbw is not a bandwidth and busbw is 0 by nccl-tests' definition. Use 2+ ranks.")


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """bench's own footer: the peak busbw and the transport."""
    lines = []
    peak = peak_cell(doc.get("rows") or [])
    if doc.get("world_size") == 1 and doc.get("source") != "nccl-tests import":
        lines.append(ONE_RANK)
    elif peak:
        text = f"# Peak bus bandwidth   : {peak[0]:.3f} GB/s at {peak[1]} B ({peak[2]})"
        if doc.get("link_rate_gbps"):
            text += f", {100 * peak[0] / doc['link_rate_gbps']:.1f}% of {doc['link_rate_gbps']:g} GB/s"
        lines.append(text)
    lines.append(f"# Transport            : {describe_transport(doc)}")
    from ncclcheck.render.expected import bench_lines

    lines += bench_lines(doc.get("expected"))
    if doc.get("candidate_env"):
        lines.append("# Configuration        : " + " ".join(
            f"{k}={v}" for k, v in sorted(doc["candidate_env"].items())))
    return lines


def render_compare(doc: dict[str, Any]) -> str:
    """The side-by-side busbw table of a ``--compare`` document. ``*`` marks a size's winner
    only when it wins beyond the spread of the repeats (:func:`~ncclcheck.bench.document.
    clear_winner`); the last lines name the best run, or say why none is named.

    >>> run = lambda bw: {"rows": [{"size_bytes": 1024, "out_of_place": {"busbw_gbps": bw}}],
    ...                   "peak_busbw_gbps": bw, "avg_busbw_gbps": bw, "wrong_total": 0}
    >>> print(render_compare({"runs": [{"label": "a.env", "bench": run(1.0)},
    ...                                {"label": "b.env", "bench": run(2.0)}],
    ...                       "best": {"label": "b.env", "peak_busbw_gbps": 2.0}}), end="")
    # busbw (GB/s, out-of-place) per configuration; * marks a winner beyond the spread of repeats
    #       size       a.env        b.env
            1024        1.00         2.00*
    # peak busbw        1.00         2.00*
    # avg busbw         1.00         2.00*
    # best: b.env (peak busbw 2.000 GB/s)
    """
    from ncclcheck.bench.document import busbw_spread, clear_winner, row_at

    runs = doc.get("runs") or []
    best = doc.get("best")
    width = max([10] + [len(r["label"]) + 1 for r in runs])
    lines = ["# busbw (GB/s, out-of-place) per configuration; * marks a winner beyond the "
             "spread of repeats",
             "# " + f"{'size':>10}" + "".join(f"  {r['label']:>{width}} " for r in runs).rstrip()]
    sizes: list[int] = []
    for r in runs:
        for row in r["bench"].get("rows") or []:
            if row["size_bytes"] not in sizes:
                sizes.append(row["size_bytes"])

    def cells(values: list[float | None], winner: int | None) -> str:
        out = ""
        for i, v in enumerate(values):
            out += f"  {'-' if v is None else f'{v:.2f}':>{width}}{'*' if i == winner else ' '}"
        return out.rstrip()

    ignored = doc.get("ignored") or {}
    for size in sizes:
        found = [row_at(r, size) for r in runs]
        winner = None if ignored.get("all") else clear_winner([busbw_spread(f) for f in found])
        lines.append(f"  {size:>10}" + cells([f["out_of_place"]["busbw_gbps"] if f else None
                                              for f in found], winner))
    top = next((i for i, r in enumerate(runs) if best and r["label"] == best["label"]), None)
    lines.append(f"# {'peak busbw':<10}" + cells([r["bench"].get("peak_busbw_gbps")
                                                  for r in runs], top))
    lines.append(f"# {'avg busbw':<10}" + cells([r["bench"].get("avg_busbw_gbps")
                                                 for r in runs], top))
    if ignored:
        names = ", ".join(ignored["variables"])
        lines.append(f"# {ignored['backend']} ignores {names}: only libnccl reads "
                     f"{'it' if len(ignored['variables']) == 1 else 'them'}, and the "
                     f"{ignored['backend']} backend does not load it (use GPUs with the nccl "
                     "backend to compare NCCL settings)")
    if best:
        lines.append(f"# best: {best['label']} (peak busbw {best['peak_busbw_gbps']:.3f} GB/s)")
    elif len([r for r in runs if r["bench"].get("rows")]) > 1:
        why = ("the runs differ only in settings the backend ignores" if ignored.get("all")
               else "the differences are within the spread of repeats (out-of-place vs "
               "in-place, mean vs slowest rank)")
        lines.append(f"# no winner: {why}")
    return "\n".join(lines) + "\n"


class RichProgress:
    """A progress bar over the sweep (only used when stdout is a terminal)."""

    def __init__(self, console: Any, label: str = "bench") -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                                  console=console, transient=True)
        self._task = None
        self._label = label

    def start(self, total: int) -> None:  # noqa: D102
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(self._label, total=total, last="")

    def update(self, done: int, row: dict[str, Any]) -> None:  # noqa: D102
        if self._task is None:
            return
        cell = (row or {}).get("out_of_place") or {}
        last = (f"{row.get('size_bytes')} B: {cell.get('busbw_gbps', 0):.2f} GB/s busbw"
                if row else "")
        self._progress.update(self._task, completed=done, last=last)

    def stop(self) -> None:  # noqa: D102
        if self._task is not None:
            self._progress.stop()
            self._task = None
