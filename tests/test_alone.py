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
def meet(other, deadline):
    # this module has started; wait (up to the deadline) for the other one to start too
    open({log!r} + ".{name}", "a").close()
    while not os.path.exists({log!r} + "." + other) and time.monotonic() < deadline:
        time.sleep(0.01)

@pytest.mark.parametrize("i", [pytest.param(i, marks=pytest.mark.alone) if i in {alone!r} else i
                               for i in range({count})])
def test_{name}(i):
    if {meet!r} and i == 0:
        meet({meet!r}, time.monotonic() + 20)
    start = time.monotonic()
    time.sleep({sleep!r}[i] if isinstance({sleep!r}, tuple) else {sleep!r})
    with open({log!r}, "a") as f:
        f.write(f"{name} {{start}} {{time.monotonic()}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
"""


def intervals(log: Path) -> list[tuple[str, float, float, str]]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(name, float(a), float(b), worker) for name, a, b, worker in rows]


def start_modules(folder: Path, modules: tuple, sleep: float) -> tuple[subprocess.Popen, Path]:
    """Each module's tests (``count`` of them, ``sleep`` s each; the first waits to ``meet``
    the module it names, if any; a fifth item names the tests marked ``alone`` one by one,
    and a sixth their own sleeps) under README's xdist options, started in the background.
    Hypothesis' plugin is left out: importing it was most of each pytest process's start."""
    folder.mkdir()
    log = folder / "log"
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "setup.cfg").write_text("[tool:pytest]\nmarkers =\n    alone: runs alone\n")
    for name, mark, count, meet, *per_test in modules:
        alone, sleeps = (list(per_test) + [(), sleep])[:2]
        (folder / f"test_{name}.py").write_text(
            MODULE.format(name=name, mark=mark, log=str(log), count=count, meet=meet,
                          sleep=sleeps, alone=tuple(alone)))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile",
                             "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                             "--basetemp", str(folder / "tmp"), str(folder)],
                            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, log


def finish(run: tuple[subprocess.Popen, Path]) -> list[tuple[str, float, float, str]]:
    proc, log = run
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    return intervals(log)


def overlap(x, y) -> bool:
    return x[1] < y[2] and y[1] < x[2]


def test_alone_tests_run_by_themselves_and_the_others_side_by_side(tmp_path):
    # Two runs at once (each has its own lock, under its own --basetemp).
    # xdist hands out the largest module first: without the lock "solo" would run beside "a".
    mixed = start_modules(tmp_path / "mixed", (("solo", "pytestmark = pytest.mark.alone", 6, ""),
                                               ("a", "", 4, ""), ("b", "", 4, "")), 0.25)
    # Unmarked modules only, each on a worker: their first tests wait for each other to start
    # (up to 20 s), so they overlap unless something serialises them.
    plain = start_modules(tmp_path / "plain", (("a", "", 2, "b"), ("b", "", 2, "a")), 0.1)
    # The mark per test: p's second test is marked, p's first and q's are not. p0 and q0 meet;
    # p1 would start while q0 still sleeps, so it overlaps q0 unless it waits for its turn.
    part = start_modules(tmp_path / "part", (("p", "", 2, "q", (1,), (0.1, 0.3)),
                                             ("q", "", 2, "p", (), (0.8, 0.1))), 0.1)
    got = finish(mixed)
    assert len(got) == 14 and {w for *_, w in got} == {"gw0", "gw1"}
    solo = [g for g in got if g[0] == "solo"]
    others = [g for g in got if g[0] != "solo"]
    for _, a, b, _ in solo:
        assert all(b2 <= a or a2 >= b for _, a2, b2, _ in others), (a, b, others)
    # unmarked modules are not serialised: they overlap
    got = finish(plain)
    assert len(got) == 4 and {w for *_, w in got} == {"gw0", "gw1"}
    assert any(a1 < b2 and a2 < b1 for n1, a1, b1, _ in got for n2, a2, b2, _ in got
               if n1 != n2), got
    # a module's unmarked tests run beside others while its marked test runs by itself
    got = finish(part)
    (p0, p1), (q0, q1) = (sorted((g for g in got if g[0] == n), key=lambda g: g[1]) for n in "pq")
    assert p0[3] != q0[3] and overlap(p0, q0), got
    assert not overlap(p1, q0) and not overlap(p1, q1), got
