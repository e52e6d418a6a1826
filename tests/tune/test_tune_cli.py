"""Bad input to ``ncclcheck tune`` is one line and exit 2, before anything runs."""

from __future__ import annotations

import subprocess
import sys

import pytest


def tune(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ncclcheck", "tune", *args], capture_output=True,
                          text=True, timeout=60, check=False, env=env)


@pytest.mark.parametrize("args,says", [
    (["--hostfile", "/nonexistent/hosts"], "cannot read hostfile"),
    (["--hostfile", "/dev/null", "--budget", "soon"], "--budget 'soon'"),
    (["--hostfile", "/dev/null", "--repeats", "1"], "--repeats"),
    (["--hostfile", "/dev/null", "--format", "yaml"], "--format"),
])
def test_bad_input_is_one_line_exit_2(args, says):
    out = tune(*args)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr


def test_no_nodes_says_how_to_give_them():
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = tune(env=env)
    assert out.returncode == 2
    assert "--hostfile" in out.stderr and "--launcher slurm" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_tune_path_does_not_import_torch():
    code = ("import sys\n"
            "import ncclcheck.cli.tune, ncclcheck.tune.command, ncclcheck.tune.candidates\n"
            "import ncclcheck.tune.document, ncclcheck.tune.verify_remote, ncclcheck.render.tune\n"
            "import ncclcheck.bench.launch, ncclcheck.bench.command\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-500:]
