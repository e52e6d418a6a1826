"""A small SVG line-chart writer for bandwidth against message size (pure, no dependencies).

Why not a plotting library: the report needs one kind of chart (busbw against a log2 size
axis, a few lines, a dashed link-rate line), drawn as inline SVG in a page that loads nothing.
matplotlib draws it, but it is ~40 MB with numpy and a compiled core on every GPU node where
``ncclcheck report`` may run, embeds fonts or paths for each glyph, and its SVG is not stable
between versions (goldens churn). pygal and plotly write SVG/HTML that expects their own
JavaScript or CSS. This writer is ~250 lines, emits deterministic markup whose every text is
escaped, and keeps real text in the SVG so it stays searchable and prints sharp.

The chart::

    >>> svg = line_chart([Series("2 nodes", [(1024, 0.5), (1048576, 20.0), (1073741824, 45.0)])],
    ...                  references=[Reference("NDR 400 Gb/s", 50.0)],
    ...                  title="all_reduce busbw", x_title="message size", y_title="busbw (GB/s)")
    >>> svg.startswith("<svg") and "<polyline" in svg and "1G" in svg
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Iterable, Sequence

#: Okabe-Ito colours (colour-blind safe), dark enough to read on white paper; yellow left out.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#8C564B")
#: Dash patterns so lines stay apart in greyscale print (one per palette cycle).
DASHES = ("", "6 3", "2 3", "8 3 2 3")
REFERENCE_COLOUR = "#555555"
FONT = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', Arial, sans-serif"
BINARY_UNITS = ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))


@dataclass(frozen=True)
class Series:
    """One line: ``points`` are (x, y); points with a missing or non-positive x are left out."""

    label: str
    points: Sequence[tuple[float, float | None]]
    detail: str = ""       # extra tooltip text (env, nodes)


@dataclass(frozen=True)
class Reference:
    """A horizontal dashed line at ``value`` (a link rate)."""

    label: str
    value: float


@dataclass(frozen=True)
class Frame:
    """Where the plot area sits in the picture and how data maps onto it."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_lo: float = 0.0      # log2 of the smallest x shown
    x_hi: float = 1.0
    y_hi: float = 1.0
    ticks: tuple = field(default=())

    def px(self, x: float) -> float:
        """Screen x of a data x (bytes, log2 scale)."""
        span = (self.x_hi - self.x_lo) or 1.0
        return self.left + (math.log2(x) - self.x_lo) / span * (self.width - self.left - self.right)

    def py(self, y: float) -> float:
        """Screen y of a data y (linear from 0)."""
        inner = self.height - self.top - self.bottom
        return self.height - self.bottom - (y / (self.y_hi or 1.0)) * inner


def size_label(size: float) -> str:
    """A byte count as nccl-tests' binary shorthand.

    >>> [size_label(s) for s in (8, 512, 1024, 65536, 1048576, 3 << 29, 1 << 40)]
    ['8', '512', '1K', '64K', '1M', '1.5G', '1T']
    """
    for unit, suffix in BINARY_UNITS:
        if size >= unit:
            value = size / unit
            return f"{value:.0f}{suffix}" if value == int(value) else f"{value:.3g}{suffix}"
    return f"{size:.0f}" if size == int(size) else f"{size:.3g}"


def log2_ticks(lo: float, hi: float, most: int = 11) -> list[float]:
    """Powers of two spanning [lo, hi], every 1, 2, 3, 5 or 10 octaves so at most ``most`` show.

    >>> [size_label(t) for t in log2_ticks(8, 8 << 30)]
    ['8', '64', '512', '4K', '32K', '256K', '2M', '16M', '128M', '1G', '8G']
    >>> [size_label(t) for t in log2_ticks(1 << 20, 1 << 22)]
    ['1M', '2M', '4M']
    """
    a, b = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    for step in (1, 2, 3, 5, 10, 20):
        first = math.ceil(a / step) * step if step == 10 else a
        ticks = list(range(first, b + 1, step))
        if len(ticks) <= most:
            return [float(2 ** t) for t in ticks]
    return [float(2 ** a), float(2 ** b)]


def linear_ticks(top: float, most: int = 8) -> list[float]:
    """Round ticks from 0 to at least ``top`` (steps of 1, 2, 2.5 or 5 times a power of ten).

    >>> linear_ticks(45.0), linear_ticks(0.0), linear_ticks(370)
    ([0.0, 10.0, 20.0, 30.0, 40.0, 50.0], [0.0, 1.0], [0.0, 100.0, 200.0, 300.0, 400.0])
    """
    if not top > 0:
        return [0.0, 1.0]
    raw = top / (most - 2)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    count = math.ceil(top / step - 1e-9)
    return [float(round(i * step, 10)) for i in range(count + 1)]


def number(value: float) -> str:
    """A GB/s figure for a label.

    >>> number(45.0), number(2.5), number(0.123456), number(370.8)
    ('45', '2.5', '0.123', '370.8')
    """
    if value == int(value):
        return f"{value:.0f}"
    return f"{value:.4g}" if abs(value) >= 1 else f"{value:.3g}"


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _usable(series: Iterable[Series]) -> list[tuple[Series, list[tuple[float, float]]]]:
    out = []
    for s in series:
        pts = [(float(x), float(y)) for x, y in s.points
               if x is not None and y is not None and x > 0 and math.isfinite(y)]
        out.append((s, sorted(pts)))
    return out


def frame_for(data: list[tuple[Series, list[tuple[float, float]]]],
              references: Sequence[Reference], width: int, height: int,
              legend_rows: int) -> Frame:
    """Axis ranges that hold every point and reference line, with round ticks."""
    xs = [x for _, pts in data for x, _ in pts] or [1.0, 1024.0]
    ys = [y for _, pts in data for _, y in pts] + [r.value for r in references]
    x_lo, x_hi = min(xs), max(xs)
    if x_lo == x_hi:
        x_lo, x_hi = x_lo / 2, x_hi * 2
    yticks = linear_ticks(max(ys + [0.0]) * 1.05)
    return Frame(width=width, height=height, left=64, right=24, top=40 + 18 * legend_rows,
                 bottom=56, x_lo=math.floor(math.log2(x_lo)), x_hi=math.ceil(math.log2(x_hi)),
                 y_hi=yticks[-1],
                 ticks=(tuple(log2_ticks(x_lo, x_hi)), tuple(yticks)))


def _axes(f: Frame, x_title: str, y_title: str) -> list[str]:
    xticks, yticks = f.ticks
    base_y, right = f.height - f.bottom, f.width - f.right
    out = ['<g class="grid" stroke="#d9d9d9" stroke-width="1">']
    for t in yticks:
        out.append(f'<line x1="{f.left}" y1="{_fmt(f.py(t))}" x2="{right}" y2="{_fmt(f.py(t))}"/>')
    for t in xticks:
        out.append(f'<line x1="{_fmt(f.px(t))}" y1="{f.top}" x2="{_fmt(f.px(t))}" y2="{base_y}"/>')
    out.append("</g>")
    out.append(f'<g class="axes" stroke="#333333" stroke-width="1.2" fill="none">'
               f'<line x1="{f.left}" y1="{base_y}" x2="{right}" y2="{base_y}"/>'
               f'<line x1="{f.left}" y1="{f.top}" x2="{f.left}" y2="{base_y}"/></g>')
    out.append('<g class="ticks" fill="#333333" font-size="12">')
    for t in xticks:
        out.append(f'<text x="{_fmt(f.px(t))}" y="{base_y + 18}" text-anchor="middle">'
                   f'{escape(size_label(t))}</text>')
    for t in yticks:
        out.append(f'<text x="{f.left - 8}" y="{_fmt(f.py(t) + 4)}" text-anchor="end">'
                   f'{escape(number(t))}</text>')
    out.append("</g>")
    mid_x = (f.left + right) / 2
    mid_y = (f.top + base_y) / 2
    out.append(f'<text class="axis-title" x="{_fmt(mid_x)}" y="{f.height - 12}" '
               f'text-anchor="middle" font-size="13" fill="#222222">{escape(x_title)}</text>')
    out.append(f'<text class="axis-title" x="16" y="{_fmt(mid_y)}" text-anchor="middle" '
               f'font-size="13" fill="#222222" transform="rotate(-90 16 {_fmt(mid_y)})">'
               f'{escape(y_title)}</text>')
    return out


def _series(f: Frame, index: int, s: Series, pts: list[tuple[float, float]],
            y_title: str) -> list[str]:
    colour = PALETTE[index % len(PALETTE)]
    dash = DASHES[(index // len(PALETTE)) % len(DASHES)] if index >= len(PALETTE) else ""
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    out = [f'<g class="series" data-label="{_attr(s.label)}">',
           f'<title>{escape(s.label + (" - " + s.detail if s.detail else ""))}</title>']
    if len(pts) > 1:
        points = " ".join(f"{_fmt(f.px(x))},{_fmt(f.py(y))}" for x, y in pts)
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                   f'stroke-width="2.2" stroke-linejoin="round"{dash_attr}/>')
    for x, y in pts:
        out.append(f'<circle cx="{_fmt(f.px(x))}" cy="{_fmt(f.py(y))}" r="3" fill="{colour}">'
                   f'<title>{escape(s.label)}: {escape(size_label(x))}B, '
                   f'{escape(number(round(y, 3)))} GB/s {escape(y_title.split(" (")[0])}</title>'
                   f'</circle>')
    out.append("</g>")
    return out


def _reference(f: Frame, r: Reference) -> list[str]:
    y = _fmt(f.py(r.value))
    return [f'<g class="reference"><title>{escape(r.label)}: '
            f'{escape(number(r.value))} GB/s</title>',
            f'<line x1="{f.left}" y1="{y}" x2="{f.width - f.right}" y2="{y}" '
            f'stroke="{REFERENCE_COLOUR}" stroke-width="1.5" stroke-dasharray="7 4"/>',
            f'<text x="{f.width - f.right - 4}" y="{_fmt(f.py(r.value) - 5)}" text-anchor="end" '
            f'font-size="12" fill="{REFERENCE_COLOUR}">{escape(r.label)} '
            f'{escape(number(r.value))} GB/s</text></g>']


def _legend(f: Frame, data: list[tuple[Series, list]], columns: int) -> list[str]:
    out = ['<g class="legend" font-size="12" fill="#222222">']
    col_width = (f.width - f.left - f.right) / columns
    for i, (s, pts) in enumerate(data):
        colour = PALETTE[i % len(PALETTE)]
        dash = DASHES[(i // len(PALETTE)) % len(DASHES)] if i >= len(PALETTE) else ""
        x = f.left + (i % columns) * col_width
        y = 30 + 18 * (i // columns)
        label = s.label if len(s.label) <= 60 else s.label[:57] + "..."
        empty = "" if pts else " (no data)"
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{_fmt(x)}" y1="{y - 4}" x2="{_fmt(x + 22)}" y2="{y - 4}" '
                   f'stroke="{colour}" stroke-width="3"{dash_attr}/>'
                   f'<text x="{_fmt(x + 28)}" y="{y}">{escape(label + empty)}</text>')
    out.append("</g>")
    return out


def line_chart(series: Sequence[Series], *, references: Sequence[Reference] = (),
               title: str, x_title: str, y_title: str, width: int = 760,
               height: int = 400) -> str:
    """An SVG line chart: log2 x axis of byte sizes, linear y from 0, one polyline per series.

    Every text (labels, titles, tooltips) is escaped, so labels taken from documents are safe.

    >>> svg = line_chart([Series("a<b>", [(8, 1.0), (16, None), (0, 3.0), (32, 2.0)])],
    ...                  title="t", x_title="x", y_title="y")
    >>> "a&lt;b&gt;" in svg and "<b>" not in svg, svg.count("<circle")
    (True, 2)
    """
    data = _usable(series)
    longest = max((len(s.label) for s, _ in data), default=0)
    columns = 1 if longest > 40 else 2 if longest > 22 else 3
    legend_rows = math.ceil(len(data) / columns) if data else 0
    f = frame_for(data, references, width, height + 18 * legend_rows, legend_rows)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
           f'viewBox="0 0 {f.width} {f.height}" width="{f.width}" height="{f.height}" '
           f'font-family="{_attr(FONT)}">',
           f"<title>{escape(title)}</title>",
           f'<rect x="0" y="0" width="{f.width}" height="{f.height}" fill="#ffffff"/>',
           f'<text x="{f.left}" y="16" font-size="14" font-weight="600" fill="#111111">'
           f'{escape(title)}</text>']
    out.extend(_axes(f, x_title, y_title))
    for r in references:
        out.extend(_reference(f, r))
    for i, (s, pts) in enumerate(data):
        out.extend(_series(f, i, s, pts, y_title))
    out.extend(_legend(f, data, columns))
    out.append("</svg>")
    return "\n".join(out)
