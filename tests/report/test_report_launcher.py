"""The report says which launcher started a bench run, or that none did (issue 19: a launcher
that started one process, like 'accelerate launch --cpu', was missed silently)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ncclcheck.report.runs import launcher_text


def test_launcher_text():
    assert launcher_text({"launch": {"mode": "torchrun"}}) == "torchrun"
    assert launcher_text({"launch": {"mode": "ssh"}}) == "none (ncclcheck started the ranks)"
    assert launcher_text({"source": "nccl-tests import"}) == "not recorded (nccl-tests import)"


@pytest.mark.slow
@pytest.mark.torch
def test_a_one_process_launcher_shows_as_none_in_bench_and_report(tmp_path):
    """What 'accelerate launch --num_processes 2 --cpu' leaves: ACCELERATE_* variables and no
    rank variables. bench starts its own ranks, and both the table and the report say so."""
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update({"ACCELERATE_USE_CPU": "True", "ACCELERATE_MIXED_PRECISION": "no"})
    doc_path = tmp_path / "bench.json"
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--procs", "2", "-b", "1K",
                          "-e", "1K", "-n", "2", "-w", "1", "--timeout", "30", "-o",
                          str(doc_path)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    note = ("accelerate's variables are set (ACCELERATE_MIXED_PRECISION, ACCELERATE_USE_CPU) "
            "but not RANK and WORLD_SIZE: it started this process alone, and ncclcheck started "
            "the ranks")
    assert f"bench: {note}" in out.stderr
    assert f"(ncclcheck started the ranks on this node; no launcher detected; {note})" \
        in out.stdout
    assert json.loads(doc_path.read_text())["launch"] == {
        "mode": "local", "master_addr": "127.0.0.1",
        "master_port": json.loads(doc_path.read_text())["launch"]["master_port"], "note": note}
    page = subprocess.run([sys.executable, "-m", "ncclcheck", "report", str(doc_path),
                           "--format", "md"], capture_output=True, text=True, timeout=60)
    assert page.returncode == 0, page.stderr
    assert "| Launcher |" in page.stdout
    assert f"| none (ncclcheck started the ranks; {note}) |" in page.stdout
    html = subprocess.run([sys.executable, "-m", "ncclcheck", "report", str(doc_path)],
                          capture_output=True, text=True, timeout=60)
    assert "Launcher: none (ncclcheck started the ranks; accelerate&#39;s variables" in html.stdout
