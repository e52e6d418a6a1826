"""What a user installs is what runs: the wheel in fresh venvs, with and without ``[bench]``.

No system site-packages (see :mod:`wheel_env`): every module of the package must import with
only the dependencies the wheel declares, and ``ncclcheck bench`` must run with what
``pip install 'ncclcheck[bench]'`` brings -- torch's CPU wheel, which does not bring numpy.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from wheel_env import ROOT, installed

pytestmark = pytest.mark.slow

#: Imports every module of the installed package; prints the ones that failed, and why.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import ncclcheck
failed = {}
for mod in pkgutil.walk_packages(ncclcheck.__path__, "ncclcheck."):
    try:
        importlib.import_module(mod.name)
    except Exception as exc:
        failed[mod.name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"file": ncclcheck.__file__, "failed": failed,
                  "numpy": "numpy" in sys.modules}))
"""


def import_all(venv, cwd: Path) -> dict:
    import json

    return json.loads(venv.run([venv.python, "-c", IMPORT_ALL], cwd=cwd).stdout)


def test_every_module_imports_from_the_plain_wheel(tmp_path, tmp_path_factory):
    venv = installed(tmp_path_factory, bench=False)
    got = import_all(venv, tmp_path)
    assert got["file"].startswith(str(venv.path))
    # only the rank's measurement loop needs torch, and it says so
    assert got["failed"] == {"ncclcheck.bench.worker": "ModuleNotFoundError: No module named 'torch'"}
    venv.run(venv.pip("check"), cwd=tmp_path)
    out = venv.run([venv.bin / "ncclcheck", "probe", "--json"], cwd=tmp_path)
    assert out.stdout.startswith("{")


def test_bench_without_the_extra_says_what_to_install(tmp_path, tmp_path_factory):
    import subprocess

    venv = installed(tmp_path_factory, bench=False)
    out = subprocess.run([str(venv.bin / "ncclcheck"), "bench", "--procs", "2"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (
        1, "ncclcheck: error: torch is not installed; pip install torch (in ncclcheck's source "
           "folder: pip install '.[bench]')\n")


def test_the_bench_extra_runs_bench_cleanly_without_numpy(tmp_path, tmp_path_factory):
    venv = installed(tmp_path_factory, bench=True)
    got = import_all(venv, tmp_path)
    assert got["failed"] == {} and not got["numpy"]
    venv.run(venv.pip("check"), cwd=tmp_path)
    (tmp_path / "tmp").mkdir()
    out = venv.run([venv.bin / "ncclcheck", "bench", "--procs", "2", "-b", "1K", "-e", "64K"],
                   cwd=tmp_path, timeout=180, TMPDIR=str(tmp_path / "tmp"))
    assert out.stderr == ""                                  # no warning lines
    assert "# Avg bus bandwidth" in out.stdout
    assert list((tmp_path / "tmp").iterdir()) == []          # rank logs gone after a clean run


def readme_block(n: int) -> str:
    """The n-th (1-based) bash block at the top of README.md, as one line."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return blocks[n - 1].strip()


def test_ci_runs_the_readme_test_command_in_the_venv_it_creates():
    ci = (ROOT / ".ci" / "run").read_text()
    command = readme_block(2)
    assert "\n" not in command
    assert [ln for ln in ci.splitlines() if ln.strip() == command] != [], (command, ci)
    deps = (ROOT / "scripts" / "install-test-deps").read_text()
    assert re.search(r"python3 -m venv (--clear )?\"\$VENV\"", deps)
    assert "--system-site-packages" not in deps + ci
    assert command.startswith("scripts/install-test-deps && .venv/bin/python -m pytest")


def test_readme_install_and_schema_lines_say_what_works():
    """Issue 27 item 13: 'ncclcheck[bench]' works only once ncclcheck is on an index; the
    schema line names every document 'ncclcheck schema' prints."""
    from ncclcheck import validate

    readme = (ROOT / "README.md").read_text()
    assert "ncclcheck[bench]" not in readme
    assert "pip install '.[bench]'" in readme and "torch==2.13.0 --index-url" in readme
    [line] = [ln for ln in readme.splitlines() if ln.startswith("ncclcheck schema   ")]
    assert all(kind in line for kind in validate.KINDS), line
