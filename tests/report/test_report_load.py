"""report reads the documents the other commands write, by their schema; bad input is one line."""

from __future__ import annotations

import json

import pytest

from report_fixtures import REPORTS, SETS, documents, run_cli
from ncclcheck import schema
from ncclcheck.errors import BadInput
from ncclcheck.exitcodes import ExitCode
from ncclcheck.report.documents import KINDS, load_documents


@pytest.mark.parametrize("name", SETS)
def test_every_fixture_document_is_recognised(name):
    loaded = load_documents(documents(name))
    assert loaded and all(d["kind"] == KINDS[d["doc"]["schema"]] for d in loaded)


def test_all_five_kinds_are_covered_by_fixtures():
    kinds = {d["kind"] for name in SETS for d in load_documents(documents(name))}
    assert kinds == set(KINDS.values())


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


BAD = [
    ("notjson.json", "{nope", "not valid JSON"),
    ("noschema.json", {"hello": 1}, "not an ncclcheck document"),
    ("unknown.json", {"schema": "someone/else", "schema_version": 1}, "unknown schema"),
    ("newer.json", {"schema": "ncclcheck/bench", "schema_version": 99, "rows": []},
     "newer than this ncclcheck reads"),
    ("report.json", {"schema": "ncclcheck/report", "schema_version": 1},
     "report reads ncclcheck/facts"),
    ("rows.json", {"schema": "ncclcheck/bench", "schema_version": 1, "rows": {"a": 1}},
     "$.rows must be array"),
    ("sections.json", {"schema": "ncclcheck/facts", "schema_version": 1, "sections": []},
     "$.sections must be object"),
    ("cluster.json", {"schema": "ncclcheck/cluster", "schema_version": 1,
                      "nodes": [{"schema": "ncclcheck/bench", "schema_version": 1}]},
     "$.nodes[0].schema must be"),
    ("runs.json", {"schema": "ncclcheck/bench", "schema_version": 1, "runs": [{"label": "a"}]},
     "$.runs[0] must contain ['bench']"),
]


@pytest.mark.parametrize("name, content, needle", BAD, ids=[b[0] for b in BAD])
def test_a_bad_document_is_refused_naming_the_file(tmp_path, name, content, needle):
    path = write(tmp_path, name, content)
    good = documents("cloud-vm")[0]
    with pytest.raises(BadInput) as err:
        load_documents([good, path])
    assert str(err.value).startswith(path) and needle in str(err.value)


def test_missing_file_and_directory(tmp_path):
    for path in (str(tmp_path / "absent.json"), str(tmp_path)):
        with pytest.raises(BadInput, match=r"cannot read"):
            load_documents([path])


@pytest.mark.parametrize("name, content, needle", BAD[:5], ids=[b[0] for b in BAD[:5]])
def test_cli_bad_document_is_one_line_exit_2(tmp_path, name, content, needle):
    path = write(tmp_path, name, content)
    out = run_cli("report", documents("cloud-vm")[0], path, "-o", str(tmp_path / "r.html"))
    assert out.returncode == ExitCode.USAGE
    assert out.stderr.startswith(f"ncclcheck: error: {path}") and needle in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "r.html").exists(), "nothing is written when an input is bad"


def test_cli_needs_a_document_and_a_known_format(tmp_path):
    assert run_cli("report").returncode == ExitCode.USAGE
    out = run_cli("report", documents("cloud-vm")[0], "--format", "pdf")
    assert out.returncode == ExitCode.USAGE and "pdf" in out.stderr


def test_cli_writes_html_atomically_and_md_by_extension(tmp_path):
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    out = run_cli("report", *documents("roce-compare"), "-o", str(html), "--title", "Rack 7 <a>")
    assert out.returncode == 0 and out.stdout == "" and "report written to" in out.stderr
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>Rack 7 &lt;a&gt;</title>" in page
    assert run_cli("report", *documents("roce-compare"), "-o", str(md)).returncode == 0
    assert md.read_text().startswith("# NCCL report: 2 nodes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.md"], "no temp files left"


def test_cli_without_output_prints_to_stdout():
    out = run_cli("report", documents("cloud-vm")[0], "--format", "md")
    assert out.returncode == 0 and out.stdout.startswith("# NCCL report: 1 node (cloud-vm-01)")


def test_report_renders_a_live_probe_of_this_machine(tmp_path):
    facts = tmp_path / "facts.json"
    assert run_cli("probe", "-o", str(facts)).returncode in (0, 3)
    out = run_cli("report", str(facts), "--format", "md")
    assert out.returncode == 0
    host = schema.load(facts)["hostname"]
    assert f"# NCCL report: 1 node ({host})" in out.stdout


def test_fixture_sources_are_where_the_readme_says():
    readme = (REPORTS / "README.md").read_text()
    for name in SETS:
        assert f"`{name}/`" in readme
