"""The view model and the templates: plain data in, escaped and self-contained pages out."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser

import jinja2
import pytest

from report_fixtures import SETS, documents
from ncclcheck.report.advice import recommendation_view
from ncclcheck.report.documents import load_documents
from ncclcheck.report.page import environment
from ncclcheck.report.page import FORMATS, make_report, render
from ncclcheck.report.view import build_view


def view_of(name, **kw):
    return build_view(load_documents(documents(name)), generated_at="T", **kw)


def plain(value):
    """Only JSON types (and str subclasses such as Markup) in the view."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


#: Jinja2 looks attributes up before keys: ``row.values`` would be the dict method.
DICT_METHODS = set(dir(dict))


def keys_of(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from keys_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from keys_of(v)


@pytest.mark.parametrize("name", SETS)
def test_view_is_plain_data(name):
    view = view_of(name)
    assert plain(view)
    json.dumps(view)
    assert not set(keys_of(view)) & DICT_METHODS


def test_h100_view_says_what_matters():
    view = view_of("h100-ib")
    ov = view["overview"]
    assert ov["nodes"] == ["h100-node-01", "h100-node-02"] and ov["gpu_total"] == 16
    assert ov["transport_used"][0]["text"].startswith("IB with GPU Direct RDMA over 8 HCAs")
    assert [g["severity"] for g in view["findings"]["groups"]] == ["error", "warning", "info"]
    rails = {c["text"] for r in view["nodes"]["table"]["rows"] for c in r["cells"] if c["outlier"]}
    assert "9 of 12 active: 2 x 200 Gb/s RoCE, 7 x 400 Gb/s IB" in rails
    # node-02's pulled cable: only the DOWN port is the outlier, ACTIVE is the healthy norm
    ports = {d["host"]: d["ports"] for d in view["nodes"]["details"]}
    marked = [(r["cells"][0]["text"], c["text"]) for r in ports["h100-node-02"]["rows"]
              for c in r["cells"] if c["outlier"]]
    assert ("mlx5_5:1", "DOWN") in marked
    assert not any(c["outlier"] for r in ports["h100-node-01"]["rows"] for c in r["cells"][:2])
    chart = view["charts"][0]
    assert chart["points"] == 31 and chart["references"] == [{"label": "link rate",
                                                             "value": "400.00"}]
    hosts = view["runs"][0]["transport"]["hosts"]
    assert [r["cells"][1]["text"] for r in hosts["rows"]] == ["0-7", "8-15"]


def test_compare_runs_are_one_chart_with_a_line_each_and_the_best_marked():
    view = view_of("roce-compare")
    assert len(view["charts"]) == 1
    assert view["charts"][0]["labels"] == ["default.env", "qps4.env", "socket.env"]
    assert [r["best"] for r in view["runs"]] == [False, True, False]
    assert view["overview"]["failed"][0]["host"] == "roce-node-03"
    rec = view["recommendations"][0]
    assert "\nNCCL_SOCKET_IFNAME==bond0,bond0.100\n" in rec["env_file"]
    assert "# NOT CHECKED against roce-node-03" in rec["env_file"]


def test_what_recommend_did_not_set_is_shown_with_why():
    doc = {"env": {"NCCL_NET": "IB"},
           "reasons": {"NCCL_NET": [{"rule": "net-transport", "message": "IB everywhere",
                                     "why": "w", "docs": "javascript:x"}]},
           "conflicts": [{"var": "NCCL_IB_GID_INDEX", "values": {"ib-roce-gid-index@a": "3",
                                                                 "ib-roce-gid-index@b": "5"},
                          "why": "differs per node"}],
           "withheld": [{"var": "NCCL_IB_HCA", "value": "=mlx5_0:1", "rule": "ib-hca-select",
                         "why": "node c was not read"}],
           "refused": [{"var": "NCCL_DEBUG_FILE", "value": "/tmp/a b", "why": "a space"}],
           "ties": [{"var": "NCCL_SOCKET_IFNAME", "candidates": ["=a", "=b"], "chosen": "=a",
                     "decide_with": "ncclcheck bench --compare a.env b.env"}],
           "env_overrides": [{"var": "NCCL_NET", "host": "a", "value": "Socket"}]}
    rec = recommendation_view(doc, "r.json")
    assert [(n["kind"], n["var"]) for n in rec["not_set"]] == [
        ("conflict", "NCCL_IB_GID_INDEX"), ("withheld", "NCCL_IB_HCA"),
        ("refused", "NCCL_DEBUG_FILE")]
    assert rec["not_set"][0]["wants"][1] == {"who": "ib-roce-gid-index@b", "value": "5"}
    assert rec["ties"] == ["NCCL_SOCKET_IFNAME: =a or =b qualify equally; chosen =a; "
                           "decide with: ncclcheck bench --compare a.env b.env"]
    assert rec["overrides"] == [{"var": "NCCL_NET", "value": "Socket", "hosts": "a"}]
    assert rec["variables"][0]["reasons"][0]["docs"] == "", "only http(s) links"
    assert "NCCL_NET=IB" in rec["env_file"] and "NCCL_DEBUG_FILE" in rec["env_file"]
    page = render({**view_of("cloud-vm"), "recommendations": [rec]}, "html")
    assert "qualify equally" in page and "withheld" in page and "Overridden" in page


def test_env_file_reads_back_as_nccl_reads_it():
    from ncclcheck.envformat import parse_env_text

    doc = json.loads(open(documents("roce-compare")[2]).read())
    rec = recommendation_view(doc, "r.json")
    assert parse_env_text(rec["env_file"]) == doc["env"]


def test_missing_keys_get_defaults_not_errors(tmp_path):
    """Minimal documents of every kind: only the envelope and the main list/object."""
    minimal = [
        {"schema": "ncclcheck/facts", "schema_version": 1},
        {"schema": "ncclcheck/cluster", "schema_version": 1, "nodes": []},
        {"schema": "ncclcheck/bench", "schema_version": 1, "rows": [{"size_bytes": 8}]},
        {"schema": "ncclcheck/bench", "schema_version": 1, "runs": [{"bench": {}}]},
        {"schema": "ncclcheck/recommendation", "schema_version": 1},
        {"schema": "ncclcheck/diagnosis", "schema_version": 1, "findings": [{}]},
    ]
    paths = []
    for i, doc in enumerate(minimal):
        path = tmp_path / f"d{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    for fmt in FORMATS:
        assert make_report(paths, fmt, generated_at="T")


def test_strict_undefined_turns_a_template_typo_into_an_error():
    env = environment()
    view = view_of("cloud-vm")
    assert isinstance(env.undefined, type) and issubclass(env.undefined, jinja2.StrictUndefined)
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ report.overveiw.nodes }}").render(report=view)


HOSTILE = "<script>alert(1)</script> | `x` *y*"


def hostile_set(tmp_path):
    facts = json.loads(open(documents("cloud-vm")[0]).read())
    facts["hostname"] = HOSTILE
    facts["findings"][0]["message"] = HOSTILE + "\n# heading"
    facts["findings"][0]["docs"] = 'javascript:alert(1)" onmouseover="x'
    bench = json.loads(open(documents("h100-ib")[0]).read())
    bench["nodes"] = [HOSTILE]
    bench["env"] = {"NCCL_SOCKET_IFNAME": HOSTILE}
    rec = json.loads(open(next(d for d in documents("h100-ib") if "recommendation" in d)).read())
    var = next(iter(rec["env"]))
    rec["env"][var] = HOSTILE                    # an env value with HTML in it
    rec["reasons"][var] = [{"rule": "r", "message": HOSTILE, "why": HOSTILE, "docs": ""}]
    paths = []
    for i, doc in enumerate((facts, bench, rec)):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    return paths


def test_html_escapes_document_text_everywhere_including_the_svg(tmp_path):
    page = make_report(hostile_set(tmp_path), "html", generated_at="T")
    assert "<script" not in page and "&lt;script&gt;" in page
    env = page[page.index('<section id="env">'):]
    env = env[:env.index("</section>")]
    assert env.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3    # file, value, reason
    assert 'onmouseover="x' not in page and 'href="javascript' not in page
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert "&lt;script&gt;" in svg


def outside_code_fences(md: str) -> str:
    """The Markdown without its fenced code blocks (GitHub shows those literally)."""
    out, fence = [], None
    for line in md.splitlines():
        marker = re.match(r"(`{3,}|~{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            out.append(line)
    assert fence is None, "an unclosed code fence swallows the rest of the page"
    return "\n".join(out)


def test_markdown_keeps_document_text_inert(tmp_path):
    full = make_report(hostile_set(tmp_path), "md", generated_at="T")
    md = outside_code_fences(full)
    assert "<script>" not in md and "&lt;script&gt;" in md
    # the env file block quotes the value recommend refused, as text, inside its fence
    assert "NOT SET" in full and md.count("&lt;script&gt;") > 5
    assert "\n# heading" not in md and "<javascript:" not in md and "](javascript:" not in md
    row = next(line for line in md.splitlines() if line.startswith("| &lt;script&gt;"))
    assert row.startswith("| &lt;script&gt;alert(1)&lt;/script&gt; \\| `x` *y* |"), row


class Resources(HTMLParser):
    """Every attribute that could make a browser load something."""

    def __init__(self):
        super().__init__()
        self.loads, self.links, self.csp, self.tags = [], [], None, set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attrs = dict(attrs)
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy":
            self.csp = attrs.get("content")
        for name in ("src", "srcset", "data", "poster", "background", "action", "formaction"):
            if name in attrs:
                self.loads.append((tag, name, attrs[name]))
        if "href" in attrs:
            (self.links if tag == "a" else self.loads).append((tag, "href", attrs["href"]))
        if "xlink:href" in attrs:
            self.loads.append((tag, "xlink:href", attrs["xlink:href"]))


@pytest.mark.parametrize("name", SETS)
def test_html_is_self_contained(name):
    page = render(view_of(name), "html")
    parser = Resources()
    parser.feed(page)
    assert parser.csp == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert all(v.startswith("data:") for _, _, v in parser.loads), parser.loads
    assert all(v.startswith(("https://", "#")) for _, _, v in parser.links)
    assert "script" not in parser.tags and "iframe" not in parser.tags
    assert not re.search(r"url\(|@import|@font-face", page)


def test_golden_view_is_deterministic():
    a, b = view_of("roce-compare"), view_of("roce-compare")
    assert render(a, "html") == render(b, "html")


def test_templates_receive_no_live_objects(monkeypatch):
    """Rendering a saved view (via JSON) gives the same page as rendering the fresh one."""
    from markupsafe import Markup

    view = view_of("h100-ib")
    saved = json.loads(json.dumps(view))
    for chart in saved["charts"]:
        chart["svg"] = Markup(chart["svg"])
    assert render(saved, "html") == render(copy.deepcopy(view), "html")


def test_a_large_cluster_keeps_its_outliers_in_view(tmp_path):
    """80 nodes: the table shows 64 rows, the odd node among them, and detail tables only for
    the reference node and the odd one."""
    base = json.loads(open(documents("h100-ib")[2]).read())
    odd = json.loads(open(documents("h100-ib")[3]).read())
    paths = []
    for i in range(80):
        doc = copy.deepcopy(odd if i == 70 else base)
        doc["hostname"] = f"node-{i:03d}"
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    nodes = build_view(load_documents(paths))["nodes"]
    table = nodes["table"]
    assert len(table["rows"]) == 64 and table["more"] == 16
    assert [r["cells"][0]["text"] for r in table["rows"] if r["outlier"]] == ["node-070"]
    assert [d["host"] for d in nodes["details"]] == ["node-000", "node-070"]
    assert nodes["details_left_out"] == 78
    assert nodes["differences"][0] == {"host": "node-070", "what": "port mlx5_5:1",
                                       "detail": "state DOWN, rate 10 Gb/sec (4X)"}


def test_a_report_of_logs_alone_names_their_hosts_and_versions(tmp_path):
    """Only diagnoses: the glance still counts the hosts and NCCL versions the logs show, and a
    log without NCCL output says so instead of '0 findings'."""
    import io
    from pathlib import Path

    from ncclcheck.diagnose import diagnose_files
    from ncclcheck.schema import dump

    logs = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
    mixed = tmp_path / "mixed.json"
    dump(diagnose_files([str(logs / "version-mismatch-plugin-too-old.log")]), mixed)
    empty = tmp_path / "empty.json"
    dump(diagnose_files(["-"], stdin=io.BytesIO(b"")), empty)
    view = build_view(load_documents([str(mixed), str(empty)]), generated_at="T")
    ov = view["overview"]
    assert ov["nodes"] == ["instance-8g-96c-1", "instance-8g-96c-4"]
    assert ov["nccl_versions"] == ["2.14.3", "2.19.3"]
    assert [d["status"] for d in ov["diagnoses"]] == ["2 findings", "no NCCL output"]
    assert view["title"] == "NCCL report: 2 nodes (instance-8g-96c-1, instance-8g-96c-4)"
    page = render(view, "html")
    assert "(1 occurrence in the log)" in page and "(1 occurrences" not in page
