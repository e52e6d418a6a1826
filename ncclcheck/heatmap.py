"""SVG for the pairwise hunt: an N x N heatmap of pair bandwidth and a per-node score chart.

Pure and dependency-free, like :mod:`ncclcheck.charts` (same font and escaping): inline SVG
that loads nothing, with real text. Readable at 8 nodes (24 px cells, every name, a tooltip per
cell) and at 256 (2 px cells, every k-th name plus every slow node's; runs of one colour in a
row drawn as one rectangle, so the page stays small).

Colours are by ratio to the fleet's median pair bandwidth, in buckets (colour-blind safe,
blue = healthy to red = slow), grey where no figure exists.

>>> svg = heatmap(["a", "b"], [[None, 1.0], [1.0, None]], 1.0)
>>> svg.startswith("<svg") and svg.count("<rect") >= 4 and ">a</text>" in svg
True
>>> "<rect" in node_chart([{"host": "a", "score": 1.0, "status": "ok"}], 0.75)
True
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Sequence

FONT = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', Arial, sans-serif"
#: (lowest ratio to the fleet median, colour, legend text), best first.
BUCKETS = ((0.9, "#2c7bb6", ">= 90%"), (0.75, "#abd9e9", "75-90%"), (0.6, "#ffffbf", "60-75%"),
           (0.4, "#fdae61", "40-60%"), (0.0, "#d7191c", "< 40%"))
MISSING = "#e6e6e6"
GRID_PX = 640
TOOLTIP_MAX = 64  #: beyond this many nodes, no per-cell tooltips (the page stays small)


def colour(value: float | None, ref: float | None) -> str:
    """The bucket colour of ``value`` against ``ref``.

    >>> colour(0.95, 1.0), colour(0.1, 1.0), colour(None, 1.0)
    ('#2c7bb6', '#d7191c', '#e6e6e6')
    """
    if value is None or not ref:
        return MISSING
    ratio = value / ref
    for low, fill, _ in BUCKETS:
        if ratio >= low:
            return fill
    return BUCKETS[-1][1]


def label_step(cell: float) -> int:
    """Show every k-th name so names at 9 px do not overlap.

    >>> label_step(24), label_step(2.5)
    (1, 5)
    """
    return max(1, math.ceil(11 / cell))


def _text(x: float, y: float, value: str, anchor: str = "end", extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="9"{extra}>'
            f"{escape(value)}</text>")


def heatmap(hosts: Sequence[str], rows: Sequence[Sequence[float | None]], ref: float | None,
            slow: Sequence[str] = (), title: str = "pair bandwidth",
            links: Sequence[Sequence[str]] = ()) -> str:
    """The N x N heatmap (``rows[i][j]``: GB/s between hosts i and j, None: no figure); slow
    ``links`` ringed, so that one cell stays visible at 2 px."""
    n = len(hosts)
    cell = max(1.0, min(24.0, GRID_PX / max(n, 1)))
    left = top = 8 + 6 * min(24, max((len(h) for h in hosts), default=4))
    size = cell * n
    width, height = max(left + size + 10, left + 6 * 70 + 90), top + size + 40
    step = label_step(cell)
    marked = set(slow)
    out = [_open(width, height, title).replace("<svg ", '<svg shape-rendering="crispEdges" ', 1)]
    for i, row in enumerate(rows):
        y = top + i * cell
        fills = [MISSING if i == j else colour(row[j], ref) for j in range(n)]
        if n <= TOOLTIP_MAX:  # one cell each, with its figure as a tooltip
            for j, fill in enumerate(fills):
                tip = ("" if i == j else f"<title>{escape(hosts[i])} &lt;-&gt; "
                       f"{escape(hosts[j])}: {_gbps(row[j])}{_pct(row[j], ref)}</title>")
                out.append(f'<rect x="{left + j * cell:.1f}" y="{y:.1f}" width="{cell:.1f}" '
                           f'height="{cell:.1f}" fill="{fill}" stroke="#ffffff" '
                           f'stroke-width="0.5">{tip}</rect>')
            continue
        j = 0
        while j < n:  # a run of one colour: one rectangle
            k = j + 1
            while k < n and fills[k] == fills[j]:
                k += 1
            out.append(f'<rect x="{left + j * cell:.1f}" y="{y:.1f}" width="{(k - j) * cell:.1f}"'
                       f' height="{cell:.1f}" fill="{fills[j]}"/>')
            j = k
    where = {h: i for i, h in enumerate(hosts)}
    for pair in links:
        a, b = where.get(pair[0]), where.get(pair[1])
        if a is None or b is None:
            continue
        for i, j in ((a, b), (b, a)):
            out.append(f'<circle cx="{left + (j + 0.5) * cell:.1f}" cy="{top + (i + 0.5) * cell:.1f}"'
                       f' r="{max(cell * 0.7, 6):.1f}" fill="none" stroke="#000000" '
                       f'stroke-width="1.5"><title>slow link {escape(hosts[i])} &lt;-&gt; '
                       f"{escape(hosts[j])}</title></circle>")
    for i, host in enumerate(hosts):
        if i % step and host not in marked:
            continue
        red = ' fill="#b42318" font-weight="700"' if host in marked else ""
        mid = top + (i + 0.5) * cell + 3
        out.append(_text(left - 4, mid, host, "end", red))
        x = left + (i + 0.5) * cell
        out.append(f'<text x="{x:.1f}" y="{top - 4:.1f}" font-size="9" text-anchor="start" '
                   f'transform="rotate(-60 {x:.1f} {top - 4:.1f})"{red}>{escape(host)}</text>')
    lx = left
    for _, fill, label in BUCKETS:
        out.append(f'<rect x="{lx:.0f}" y="{top + size + 14:.0f}" width="12" height="12" '
                   f'fill="{fill}"/>')
        out.append(_text(lx + 16, top + size + 24, label, "start"))
        lx += 70
    out.append(f'<rect x="{lx:.0f}" y="{top + size + 14:.0f}" width="12" height="12" '
               f'fill="{MISSING}"/>')
    out.append(_text(lx + 16, top + size + 24, "no figure", "start"))
    out.append("</svg>")
    return "".join(out)


def node_chart(nodes: Sequence[dict[str, Any]], cut: float | None,
               title: str = "node scores") -> str:
    """Each node's score (its median pair bandwidth / the fleet's), lowest first; slow nodes
    red, the slow cut dashed."""
    judged = sorted((n for n in nodes if isinstance(n.get("score"), (int, float))),
                    key=lambda n: n["score"])
    count = max(1, len(judged))
    bar = max(1.0, min(40.0, GRID_PX / count))
    left, top, plot_h = 44, 12, 180
    labels = count <= 32
    width = max(left + bar * count + 20, 300)
    height = top + plot_h + 90
    ymax = max([1.2] + [n["score"] for n in judged])
    out = [_open(width, height, title)]

    def y(v: float) -> float:
        return top + plot_h * (1 - v / ymax)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{left}" x2="{width - 10:.0f}" y1="{y(tick):.1f}" '
                   f'y2="{y(tick):.1f}" stroke="#d0d7de" stroke-width="0.5"/>')
        out.append(_text(left - 4, y(tick) + 3, f"{tick:.0%}"))
    for i, node in enumerate(judged):
        fill = "#d7191c" if node.get("status") == "slow" else "#2c7bb6"
        x = left + i * bar
        out.append(f'<rect x="{x:.1f}" y="{y(node["score"]):.1f}" width="{max(bar - 1, 1):.1f}" '
                   f'height="{plot_h - (y(node["score"]) - top):.1f}" fill="{fill}">'
                   f'<title>{escape(node["host"])}: {node["score"]:.0%} of the fleet median'
                   f"</title></rect>")
        if labels or node.get("status") == "slow":  # big fleets: only the slow are named
            cx, cy = x + bar / 2, top + plot_h + 6
            out.append(f'<text x="{cx:.1f}" y="{cy:.1f}" font-size="9" text-anchor="end" '
                       f'transform="rotate(-60 {cx:.1f} {cy:.1f})">{escape(node["host"])}</text>')
    if cut:
        out.append(f'<line x1="{left}" x2="{width - 10:.0f}" y1="{y(cut):.1f}" y2="{y(cut):.1f}" '
                   f'stroke="#b42318" stroke-dasharray="6 3"/>')
        out.append(_text(width - 12, y(cut) - 3, f"slow below {cut:.0%}"))
    out.append("</svg>")
    return "".join(out)


def _open(width: float, height: float, title: str) -> str:
    """The ``<svg>`` element, drawn at its own size at most (the page's CSS stretches charts)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" style="max-width:{width:.0f}px" '
            f'role="img" font-family="{FONT}"><title>{escape(title)}</title>')


def _gbps(value: float | None) -> str:
    return "no figure" if value is None else f"{value:.4g} GB/s"


def _pct(value: float | None, ref: float | None) -> str:
    return "" if value is None or not ref else f" ({value / ref:.0%} of the fleet median)"
