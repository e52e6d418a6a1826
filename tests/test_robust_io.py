"""Bad input never hurts (issue 16): usage errors, deep JSON, control characters, failed runs,
long names, documents written by earlier versions, and every fixture document against its schema.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck import schema, validate
from ncclcheck.errors import BadInput

FIXTURES = Path(__file__).parent / "fixtures"
HOSTS = FIXTURES / "hosts"


def ncclcheck(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120, **kw)


@pytest.mark.parametrize("args", [["probe", "--nope"], ["nocmd"], ["probe", "--fail-on", "x"],
                                  ["rank", "--nope"]])
def test_usage_error_keeps_the_hint_and_ends_with_one_error_line(args):
    out = ncclcheck(*args)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2
    assert lines[0].startswith("Usage: ncclcheck") and "for help" in lines[1]
    assert lines[-1].startswith("ncclcheck: error: ") and len(lines) == 3


@pytest.mark.parametrize("command", [["report"], ["recommend", "--probe"], ["probe", "--from"],
                                     ["recommend", "--bench"]])
def test_100000_deep_json_is_exit_2_not_recursion_error(tmp_path, command):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    out = ncclcheck(*command, str(path))
    assert out.returncode == 2, out.stderr
    assert "nested too deeply" in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize("text, needle", [
    ('{"schema": "ncclcheck/facts", "schema_version": 1, "x": NaN}', "NaN is not JSON"),
    ('{"schema": "ncclcheck/facts", "schema_version": 1, "x": -Infinity}', "is not JSON"),
    ('{"schema": "ncclcheck/facts", "schema_version": 1, "x": 1e999}', "out of range"),
    ('{"schema": "ncclcheck/facts", "schema_version": 1, "x": ' + "9" * 30 + "}", "out of range"),
])
def test_non_finite_and_absurd_numbers_are_refused(text, needle):
    with pytest.raises(BadInput, match=needle):
        schema.loads(text, "f.json")


def test_nan_and_infinity_are_never_written():
    text = schema.dumps({"schema": "ncclcheck/bench", "schema_version": 1,
                         "peak_busbw_gbps": float("nan"), "rows": [{"x": float("-inf")}]})
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["peak_busbw_gbps"] is None


def test_control_characters_in_errors_are_escaped(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema": "ncclcheck/facts\x1b]0;pwned\x07", "schema_version": 1}))
    out = ncclcheck("report", str(path))
    assert out.returncode == 2 and "\x1b" not in out.stderr and "\\x1b]0;pwned\\x07" in out.stderr
    out = ncclcheck("bench", "--env", "NCCL_X\x1b[2J", "--procs", "1")
    assert out.returncode == 2 and "\x1b" not in out.stderr, out.stderr


def test_every_host_failed_keeps_the_earlier_output(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("198.18.255.254\n")
    target = tmp_path / "cluster.json"
    target.write_text("earlier")
    out = ncclcheck("probe", "--hostfile", str(hosts), "--connect-timeout", "1", "--timeout", "2",
                    "-o", str(target))
    assert out.returncode == 1
    assert target.read_text() == "earlier" and "is not written" in out.stderr


def test_every_compare_run_failed_keeps_the_earlier_output(tmp_path, console):
    from ncclcheck.bench.command import BenchRequest, write_outputs

    target = tmp_path / "cmp.json"
    target.write_text("earlier")
    req = BenchRequest(output=str(target))
    write_outputs({"schema": "ncclcheck/bench", "schema_version": 1}, req, "", console,
                  to_file=False)
    assert target.read_text() == "earlier" and "is not written" in console.file.getvalue()
    write_outputs({"schema": "ncclcheck/bench", "schema_version": 1}, req, "", console)
    assert json.loads(target.read_text())["schema"] == "ncclcheck/bench"


def test_record_into_a_300_character_name_is_exit_2(tmp_path):
    out = ncclcheck("record", str(tmp_path / ("r" * 300)))
    assert out.returncode == 2 and "File name too long" in out.stderr
    assert "internal error" not in out.stderr


# -- schemas ---------------------------------------------------------------------------------

def fixture_documents():
    for path in sorted(FIXTURES.rglob("*.json")):
        try:
            docs = json.loads(path.read_text())
        except ValueError:
            continue
        for doc in docs if isinstance(docs, list) else [docs]:
            if isinstance(doc, dict) and doc.get("schema") in schema.SCHEMAS:
                yield path, doc


def test_every_fixture_document_validates():
    """Documents written by earlier versions of ncclcheck (the fixtures) still read."""
    seen = set()
    for path, doc in fixture_documents():
        schema.check(doc, str(path))
        seen.add(doc["schema"])
    assert seen >= {"ncclcheck/facts", "ncclcheck/cluster", "ncclcheck/bench",
                    "ncclcheck/diagnosis", "ncclcheck/recommendation"}


def test_an_older_schema_version_is_upgraded_before_validation(monkeypatch):
    """When a version is bumped, UPGRADES turns the older document into the newer one."""
    monkeypatch.setitem(schema.SCHEMAS, "ncclcheck/facts", 2)
    monkeypatch.setitem(schema.UPGRADES, ("ncclcheck/facts", 1),
                        lambda d: {**d, "sections": d.pop("old_sections")})
    doc = schema.check({"schema": "ncclcheck/facts", "schema_version": 1, "hostname": "n",
                        "old_sections": {}}, "old.json")
    assert doc["schema_version"] == 2 and doc["sections"] == {}


@pytest.mark.parametrize("kind", validate.KINDS)
def test_schema_command_prints_a_self_contained_schema(kind):
    out = ncclcheck("schema", kind)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["properties"]["schema"] == {"const": f"ncclcheck/{kind}"}
    refs = {r.split("/")[-1] for r in _refs(printed)}
    assert refs <= set(printed["definitions"])


def test_schema_command_lists_and_refuses_unknown():
    out = ncclcheck("schema")
    assert out.returncode == 0 and all(k in out.stdout for k in validate.KINDS)
    out = ncclcheck("schema", "nope")
    assert out.returncode == 2 and "no schema named 'nope'" in out.stderr


def _refs(value):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


@pytest.mark.parametrize("command", [["report"], ["recommend", "--probe"], ["recommend", "--bench"],
                                     ["probe", "--from"], ["probe", "--hostfile"],
                                     ["bench", "--import"], ["rank", "--hostfile"]])
def test_an_endless_input_is_exit_2_within_10_s(command):
    import time

    started = time.monotonic()
    out = ncclcheck(*command, "/dev/zero")
    assert out.returncode == 2 and "larger than 16 MiB" in out.stderr, out.stderr
    assert time.monotonic() - started < 10


def test_infile_refuses_a_large_regular_file_without_reading_it(tmp_path, monkeypatch):
    from ncclcheck import infile

    path = tmp_path / "big"
    with open(path, "wb") as f:
        f.truncate(20 << 20)  # sparse: 20 MiB that cost nothing
    monkeypatch.setitem(infile.LIMITS, "hostfile", 1 << 20)
    with pytest.raises(BadInput, match="larger than 1 MiB"):
        infile.read_text(path, "hostfile")
    with pytest.raises(BadInput, match="cannot read"):
        infile.read_text(tmp_path, "hostfile")


@pytest.mark.parametrize("command", [["probe", "--from"], ["report", "--format", "md"],
                                     ["recommend", "--explain", "--probe"]])
def test_control_characters_from_documents_never_reach_the_terminal(tmp_path, command):
    facts = json.loads((HOSTS / "cloud-vm-1nic" / "facts.json").read_text())
    facts["hostname"] = "evil\x1b]0;pwned\x07\x1b[2J"
    facts["findings"][0]["message"] += "\x1b[31m\r"
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(facts))
    out = ncclcheck(*command, str(path))
    assert out.returncode in (0, 3), out.stderr
    assert "\x1b" not in out.stdout + out.stderr and "\r" not in out.stdout + out.stderr
    assert "\\x1b" in out.stdout + out.stderr


def test_probe_pays_for_no_validation():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "ncclcheck", "probe",
                          "--replay", str(HOSTS / "cloud-vm-1nic"), "--json"],
                         capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items()
                              if k != "NCCLCHECK_VALIDATE_WRITES"})  # as a user runs it
    assert out.returncode == 0 and "ncclcheck.schema" in out.stderr  # importtime is on
    assert "fastjsonschema" not in out.stderr and "ncclcheck.validate" not in out.stderr


def test_rank_outside_any_launcher_is_one_line_and_exit_2():
    """Without --hostfile, rank reads the launcher (issue 30); where none says which node this
    is, it is one error line, not a usage text."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI_", "PMIX_", "SLURM_", "PET_", "LWS_", "JOB_"))
           and k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK", "GROUP_RANK")}
    out = ncclcheck("rank", env=env)
    assert out.returncode == 2
    assert out.stderr.startswith("ncclcheck: error: --hostfile is needed outside mpirun")
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["rules"], ["schema", "facts"]])   # rich's output, and click's
def test_a_reader_that_stops_early_ends_the_command_quietly(args):
    # `ncclcheck rules | head`: here the reader is gone before the first write
    r, w = os.pipe()
    os.close(r)
    try:
        out = subprocess.run([sys.executable, "-m", "ncclcheck", *args], stdout=w,
                             stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert (out.returncode, out.stderr) == (1, "")


def test_a_broken_pipe_of_its_own_is_an_internal_error_not_silence(monkeypatch, capsys):
    # the CI failure's other half: a worker's pipe broke and `diagnose` exited with nothing said
    import ncclcheck.cli.main as climain

    def broken(*args, **kw):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(climain.cli, "main", broken)
    monkeypatch.delenv("NCCLCHECK_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exc:
        climain.main(["rules"])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and err.count("\n") == 1, err
    assert err.startswith("ncclcheck: internal error: BrokenPipeError")
