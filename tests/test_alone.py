"""The ``alone`` and ``deadline`` markers under README's test command (pytest-xdist, two workers,
``--dist loadfile``; tests/conftest.py): one worker runs every alone test, one after another and
never two at once; the other tests run beside them at nice 10, their child processes too; a
deadline test runs at nice 0."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parent
README = TESTS.parent / "README.md"

CONFTEST = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_runtest_protocol = suite.pytest_runtest_protocol  # the hooks under test
pytest_xdist_make_scheduler = suite.pytest_xdist_make_scheduler
"""

MODULE = """
import os, subprocess, sys, time, pytest
{mark}
@pytest.mark.parametrize("i", range({count}))
def test_{name}(i):
    start = time.monotonic()
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(0, 0))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    time.sleep(0.25)
    with open({log!r}, "a") as f:
        f.write(f"{name} {{start}} {{time.monotonic()}} {{os.environ['PYTEST_XDIST_WORKER']}} "
                f"{{os.getpriority(0, 0)}} {{child}}\\n")
"""


def readme_xdist_options() -> list[str]:
    """The pytest-xdist options of README's test command (its second block)."""
    command = re.findall(r"```bash\n(.*?)\n```", README.read_text(), re.S)[1]
    argv = shlex.split(command.split("&&")[-1])
    return argv[argv.index("-n"):argv.index("-n") + 4]


def test_readme_runs_the_suite_on_two_workers_by_module():
    assert readme_xdist_options() == ["-n", "2", "--dist", "loadfile"]


def test_alone_tests_run_one_at_a_time_on_one_worker_and_the_others_beside_them_niced(tmp_path):
    log = tmp_path / "log"
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "setup.cfg").write_text(
        "[tool:pytest]\nmarkers =\n    alone: runs alone\n    deadline: a deadline\n")
    # loadfile hands out the largest modules first, one to each worker: without the scheduler of
    # tests/conftest.py, solo1 and solo2 would run on two workers (held apart by the lock alone)
    modules = (("solo1", "pytestmark = pytest.mark.alone", 4),
               ("solo2", "pytestmark = pytest.mark.alone", 3),
               ("plain", "", 2), ("timed", "pytestmark = pytest.mark.deadline", 2))
    for name, mark, count in modules:
        (tmp_path / f"test_{name}.py").write_text(
            MODULE.format(name=name, mark=mark, log=str(log), count=count))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", *readme_xdist_options(),
                          "-p", "no:cacheprovider", "-p", "no:hypothesispytest", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = [line.split() for line in log.read_text().splitlines()]
    got = [(name, float(a), float(b), worker, int(nice), int(child))
           for name, a, b, worker, nice, child in rows]
    assert len(got) == 11
    solo = [g for g in got if g[0].startswith("solo")]
    others = [g for g in got if not g[0].startswith("solo")]
    # every alone test on one worker, never two at once
    assert len({g[3] for g in solo}) == 1, solo
    for i, (_, a, b, *_) in enumerate(solo):
        assert all(b2 <= a or a2 >= b for _, a2, b2, *_ in solo[i + 1:]), solo
    # the others are not held back: they ran beside the alone tests, on the other worker
    assert {g[3] for g in others} - {solo[0][3]}, others
    assert any(a1 < b2 and a2 < b1 for _, a1, b1, *_ in solo for _, a2, b2, *_ in others), got
    # niceness, of the test and of the processes it starts (lowering it back needs root)
    if os.geteuid() == 0:
        assert {(g[0][:5], g[4], g[5]) for g in got} == {
            ("solo1", 0, 0), ("solo2", 0, 0), ("plain", 10, 10), ("timed", 0, 0)}, got
