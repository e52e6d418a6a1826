"""The ``alone`` marker under README's test command (pytest-xdist, two workers): a marked test
never overlaps another test, and the others still run side by side (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_runtest_protocol = suite.pytest_runtest_protocol  # the hook under test
"""

MODULE = """
import os, time, pytest
{mark}
@pytest.mark.parametrize("i", range({count}))
def test_{name}(i):
    start = time.monotonic()
    time.sleep(0.4)
    with open({log!r}, "a") as f:
        f.write(f"{name} {{start}} {{time.monotonic()}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
"""


def intervals(log: Path) -> list[tuple[str, float, float, str]]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(name, float(a), float(b), worker) for name, a, b, worker in rows]


def run_modules(folder: Path, modules: tuple) -> list[tuple[str, float, float, str]]:
    """Each module's tests (``count`` of them, 0.4 s each) under README's xdist options."""
    folder.mkdir()
    log = folder / "log"
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "setup.cfg").write_text("[tool:pytest]\nmarkers =\n    alone: runs alone\n")
    for name, mark, count in modules:
        (folder / f"test_{name}.py").write_text(
            MODULE.format(name=name, mark=mark, log=str(log), count=count))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile",
                          "-p", "no:cacheprovider", str(folder)],
                         cwd=folder, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return intervals(log)


def test_alone_tests_run_by_themselves_and_the_others_side_by_side(tmp_path):
    # xdist hands out the largest module first: without the lock "solo" would run beside "a"
    got = run_modules(tmp_path / "mixed", (("solo", "pytestmark = pytest.mark.alone", 6),
                                           ("a", "", 4), ("b", "", 4)))
    assert len(got) == 14 and {w for *_, w in got} == {"gw0", "gw1"}
    solo = [g for g in got if g[0] == "solo"]
    others = [g for g in got if g[0] != "solo"]
    for _, a, b, _ in solo:
        assert all(b2 <= a or a2 >= b for _, a2, b2, _ in others), (a, b, others)
    # unmarked modules are not serialised: they overlap
    got = run_modules(tmp_path / "plain", (("a", "", 4), ("b", "", 4)))
    assert any(a1 < b2 and a2 < b1 for n1, a1, b1, _ in got for n2, a2, b2, _ in got
               if n1 != n2), got
