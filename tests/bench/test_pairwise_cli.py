"""``bench --pairwise`` and ``--rounds`` refuse bad combinations in one line, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest


def ncclcheck(*args):
    return subprocess.run([sys.executable, "-m", "ncclcheck", "bench", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args,message", [
    (["--rounds", "3"], "--rounds needs --pairwise"),
    (["--budget", "5m"], "--budget needs --pairwise"),
    (["--pairwise", "--hostfile", "HOSTS", "--budget", "soon"], "--budget 'soon'"),
    (["--pairwise", "--hostfile", "HOSTS", "--budget", "30s"], "--budget 30s: 3 rounds"),
    (["--pairwise"], "--pairwise needs nodes"),
    (["--pairwise", "--hostfile", "HOSTS", "--op", "all_reduce"], "drop --op all_reduce"),
    (["--pairwise", "--hostfile", "HOSTS", "--procs", "2"], "one rank per node"),
    (["--pairwise", "--hostfile", "ONE"], "at least 2 nodes (have 1)"),
    (["--pairwise", "--hostfile", "HOSTS", "--compare", "a.env"], "cannot be combined"),
])
def test_bad_combinations(tmp_path, args, message):
    (tmp_path / "HOSTS").write_text("node1\nnode2\nnode3\n")
    (tmp_path / "ONE").write_text("node1\n")
    args = [str(tmp_path / a) if a in ("HOSTS", "ONE") else a for a in args]
    out = ncclcheck(*args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
