"""The report reads ncclcheck/pairwise documents: verdicts with evidence, an N x N heatmap and
a per-node chart, readable at 8 nodes (a tooltip per cell) and at 256 (runs of one colour, slow
ones named and ringed)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ncclcheck import heatmap
from ncclcheck.pairwise import document, simulate
from ncclcheck.report.documents import check_shape, load_documents
from ncclcheck.report.view import build_view
from ncclcheck.schema import dumps
from ncclcheck.errors import BadInput


def hunt_doc(n, slow_node=4, slow_link=(1, 5)):
    fleet = simulate.Fleet(n, {slow_node: 0.2} if slow_node is not None else {},
                           {slow_link: 0.2} if slow_link else {}, noise=0.1, base=0.012)
    measure = fleet.measurer()
    from ncclcheck.pairwise import schedule
    rounds = schedule.plan(n)
    pairs = [{"round": r, "a": a, "b": b, "gbps": measure(a, b), "time_us": [1, 1],
              "latency_us": [80, 80]} for r, rnd in enumerate(rounds) for a, b in rnd]
    raw = {"hosts": [], "size_bytes": 2 << 20, "rounds": rounds, "confirm_rounds": [],
           "pairs": pairs, "backend": "gloo", "warmup": 1, "iters": 3}
    return document.build(raw, [f"node{i + 1}" for i in range(n)], None)


def page(tmp_path, *docs, fmt="html"):
    paths = []
    for i, doc in enumerate(docs):
        p = tmp_path / f"hunt{i}.json"
        p.write_text(dumps(doc))
        paths.append(str(p))
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "report", *paths, "--format", fmt],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_eight_nodes_names_with_evidence_and_tooltips(tmp_path):
    html = page(tmp_path, hunt_doc(8))
    section = html[html.index('<section id="pairwise">'):]
    section = section[:section.index("</section>")]
    assert "slow node</span></td><td>node5</td>" in section
    assert "slow link</span></td><td>node2 &lt;-&gt; node6</td>" in section
    assert section.count("<svg") == 2
    assert section.count("<title>node1 &lt;-&gt; node2: ") == 1      # a tooltip per cell
    assert len(re.findall(r'<rect [^>]*fill="#d7191c"', section)) >= 14 + 2  # node5's cross
    assert "slow link node2 &lt;-&gt; node6" in section                # ringed
    assert 'href="#pairwise"' in html


def test_256_nodes_stays_small_and_names_the_slow(tmp_path):
    html = page(tmp_path, hunt_doc(256))
    section = html[html.index('<section id="pairwise">'):]
    assert len(section) < 300_000                       # runs of one colour, no tooltips
    assert "<title>node1 &lt;-&gt; node2" not in section
    assert re.search(r'font-weight="700"[^>]*>node5</text>', section)  # named on the axes
    assert "slow link node2 &lt;-&gt; node6" in section


def test_healthy_hunt_says_nothing_named(tmp_path):
    md = page(tmp_path, hunt_doc(8, slow_node=None, slow_link=None), fmt="md")
    assert "## Fleet hunt: hunt0.json" in md and "Nothing named" in md


def test_markdown_table_of_verdicts(tmp_path):
    md = page(tmp_path, hunt_doc(8), fmt="md")
    assert "| slow node | node5 |" in md and "| slow link | node2 &lt;-&gt; node6 |" in md


def test_bad_pairwise_document_is_one_line(tmp_path):
    doc = hunt_doc(8)
    doc["slow_links"] = [{"hosts": ["node2"]}]
    with pytest.raises(BadInput, match="hunt.json: ncclcheck/pairwise slow_links"):
        check_shape(doc, "hunt.json")


def test_hunt_hosts_count_as_report_nodes(tmp_path):
    p = tmp_path / "h.json"
    p.write_text(dumps(hunt_doc(8)))
    view = build_view(load_documents([str(p)]))
    assert view["overview"]["node_count"] == 8 and len(view["pairwise"]) == 1


def test_colour_buckets_and_label_step():
    assert heatmap.colour(0.5, 1.0) == "#fdae61"
    assert heatmap.label_step(2.5) * 2.5 >= 11
