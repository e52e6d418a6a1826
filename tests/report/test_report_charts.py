"""The SVG chart writer: a log2 size axis, linear GB/s, one polyline per series, escaped text."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from ncclcheck import charts
from ncclcheck.charts import Reference, Series, line_chart

NS = "{http://www.w3.org/2000/svg}"
SIZES = [1 << e for e in range(3, 31)]


def parse(svg):
    return ET.fromstring(svg)


def polylines(root):
    return [[tuple(map(float, p.split(","))) for p in pl.get("points").split()]
            for pl in root.iter(NS + "polyline")]


def test_one_polyline_per_series_with_every_point():
    a = Series("a", [(s, s / 1e8) for s in SIZES])
    b = Series("b", [(s, 2 * s / 1e8) for s in SIZES])
    root = parse(line_chart([a, b], title="t", x_title="x", y_title="y"))
    lines = polylines(root)
    assert [len(pts) for pts in lines] == [len(SIZES), len(SIZES)]
    assert len(list(root.iter(NS + "circle"))) == 2 * len(SIZES)


def test_x_is_log2_of_size_and_y_is_linear_from_zero():
    pts = [(1024, 0.0), (1 << 20, 5.0), (1 << 30, 10.0)]
    (line,) = polylines(parse(line_chart([Series("s", pts)], title="t", x_title="x",
                                         y_title="y")))
    (x0, y0), (x1, y1), (x2, y2) = line
    assert math.isclose(x1 - x0, x2 - x1, rel_tol=1e-3), "equal octave steps are equal widths"
    assert y0 > y1 > y2 and math.isclose(y0 - y1, y1 - y2, rel_tol=1e-3)


def test_ticks_are_binary_size_labels():
    root = parse(line_chart([Series("s", [(s, 1.0) for s in SIZES])], title="t", x_title="x",
                            y_title="y"))
    labels = [t.text for g in root.iter(NS + "g") if g.get("class") == "ticks"
              for t in g.iter(NS + "text")]
    assert {"1K", "1M", "1G"} & set(labels) and "8" in labels


def test_reference_line_is_dashed_and_in_range():
    root = parse(line_chart([Series("s", [(8, 1.0), (1 << 20, 40.0)])],
                            references=[Reference("NDR", 50.0)], title="t", x_title="x",
                            y_title="y"))
    (ref,) = [g for g in root.iter(NS + "g") if g.get("class") == "reference"]
    line = ref.find(NS + "line")
    assert line.get("stroke-dasharray") and float(line.get("y1")) > 0
    assert "NDR 50 GB/s" in "".join(ref.itertext())


def test_every_text_is_escaped():
    svg = line_chart([Series('<b>"x"&</b>', [(8, 1.0), (16, 2.0)])], title="<t>",
                     x_title="<x>", y_title="<y>")
    root = parse(svg)  # parses: nothing unescaped broke the XML
    assert "<b>" not in svg and "<t>" not in svg
    assert '<b>"x"&</b>' in "".join(root.itertext())


def test_empty_and_single_point_series_still_draw():
    root = parse(line_chart([Series("none", []), Series("one", [(1 << 20, 3.0)])], title="t",
                            x_title="x", y_title="y"))
    assert polylines(root) == [] and len(list(root.iter(NS + "circle"))) == 1
    assert "none (no data)" in "".join(root.itertext())


def test_missing_and_zero_sizes_are_skipped():
    root = parse(line_chart([Series("s", [(0, 1.0), (8, None), (16, 2.0), (32, 3.0)])],
                            title="t", x_title="x", y_title="y"))
    assert [len(p) for p in polylines(root)] == [2]


def test_many_series_cycle_colours_then_dashes():
    series = [Series(f"s{i}", [(8, i), (16, i + 1)]) for i in range(10)]
    root = parse(line_chart(series, title="t", x_title="x", y_title="y"))
    strokes = [(p.get("stroke"), p.get("stroke-dasharray")) for p in root.iter(NS + "polyline")]
    assert len(set(strokes)) == 10
    assert len(charts.PALETTE) == 8
