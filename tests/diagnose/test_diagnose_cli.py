"""``ncclcheck diagnose`` end to end: files, gzip, stdin, --json, -o, --fail-on, exit codes."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.cli.context import Ctx
from ncclcheck.cli.main import main
from ncclcheck.schema import loads

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
FAILING = LOGS / "ib-completion-error-12.log"
HEALTHY = LOGS / "healthy-init-complete-32-ranks.log"


def run(argv, console, stdin: bytes | None = None, monkeypatch=None) -> int:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    with pytest.raises(SystemExit) as exc:
        main(["diagnose", *argv], obj=Ctx(out=console, err=console))
    return exc.value.code


def test_terminal_output_names_the_problem(console):
    assert run([str(FAILING)], console) == 0
    text = console.file.getvalue()
    assert "log-ib-completion-error" in text and "problems found" in text and "fix:" in text


def test_healthy_log_says_healthy_and_fail_on_passes(console):
    assert run([str(HEALTHY), "--fail-on", "info"], console) == 0
    assert "healthy: 12 processes" in console.file.getvalue()


def test_json_is_a_diagnosis_document(console, capsys):
    assert run([str(FAILING), "--json"], console) == 0
    doc = loads(capsys.readouterr().out, expect=("ncclcheck/diagnosis",))
    assert doc["healthy"] is False and doc["findings"][0]["id"] == "log-ib-completion-error"


def test_fail_on_severity_exits_3(console):
    assert run([str(FAILING), "--fail-on", "error"], console) == 3


def test_output_file_is_written(tmp_path, console):
    out = tmp_path / "diag.json"
    assert run([str(FAILING), "-o", str(out)], console) == 0
    assert loads(out.read_text())["schema"] == "ncclcheck/diagnosis"
    assert "diagnosis written" in console.file.getvalue()
    assert not list(tmp_path.glob(".diag.json.*"))      # no temporary file left behind


def test_gzip_by_magic_and_stdin(tmp_path, console, capsys, monkeypatch):
    packed = gzip.compress(FAILING.read_bytes())
    gz = tmp_path / "no-extension"
    gz.write_bytes(packed)
    assert run([str(gz), "--json"], console) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"][0]["gzip"] and doc["findings"][0]["id"] == "log-ib-completion-error"
    assert run(["-", "--json"], console, stdin=packed, monkeypatch=monkeypatch) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"][0]["name"] == "<stdin>" and doc["findings"][0]["count"] == 3


def test_several_files_are_one_job(console, capsys):
    assert run([str(LOGS / "healthy-ib-two-nodes.log"), str(LOGS / "ib-completion-error-12.log"),
                "--json"], console) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["inputs"]) == 2 and doc["summary"]["hosts"] == 3


@pytest.mark.parametrize("argv, message", [
    (["/nonexistent/nccl.log"], "/nonexistent/nccl.log: cannot read (No such file or directory)"),
    (["-", "-"], "- (standard input) can only be given once"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, console, capsys):
    assert run(argv, console) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"ncclcheck: error: {message}" and "Traceback" not in err


def test_an_empty_directory_is_bad_input(tmp_path, console, capsys):
    # a folder is a job's output (issue 22): walked; one with no files is an error
    assert run([str(tmp_path)], console) == 2
    assert "an empty folder" in capsys.readouterr().err


def test_pipe_through_a_real_process():
    data = (LOGS / "watchdog-timeout-torchrun.log").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "ncclcheck", "diagnose", "-", "--json"],
                          input=data, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["findings"][0]["id"] == "log-watchdog-timeout"


def test_no_file_is_a_usage_error(console, capsys):
    assert run([], console) == 2


def test_diagnose_never_imports_torch():
    code = ("import sys, ncclcheck.cli.main, ncclcheck.diagnose, ncclcheck.render.diagnose; "
            "from ncclcheck.diagnose import diagnose_files; "
            f"diagnose_files([{str(FAILING)!r}]); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_corrupt_gzip_is_bad_input_naming_the_file(tmp_path, console, capsys):
    bad = tmp_path / "job.log.gz"
    bad.write_bytes(b"\x1f\x8b" + b"x" * 40)
    assert run([str(bad)], console) == 2
    err = capsys.readouterr().err
    assert err.strip().startswith(f"ncclcheck: error: {bad}: not a readable gzip file (")
    assert "Traceback" not in err and err.count("\n") == 1


def test_truncated_gzip_keeps_what_was_read_and_says_so(tmp_path, console, capsys):
    text = (FAILING.read_text() + "".join(f"epoch {i} loss 0.{i:04d}\n" for i in range(60000))
            ).encode()
    packed = gzip.compress(text)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    assert run([str(cut), "--json"], console) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "end-of-stream" in doc["inputs"][0]["error"]
    assert doc["findings"][0]["id"] == "log-ib-completion-error"
    assert run([str(cut)], console) == 0
    assert "the diagnosis covers what was read" in console.file.getvalue()


def test_terminal_lists_the_variables_nccl_reports(console):
    assert run([str(LOGS / "healthy-ib-two-nodes.log")], console) == 0
    text = console.file.getvalue()
    assert "NCCL variables" in text and "NCCL_IB_HCA" in text and "mlx5_0" in text
