"""Shared fixtures: recorded hosts, a captured console, and the CLI runner."""

from __future__ import annotations

import ast
import contextlib
import fcntl
import functools
import io
import os
import shutil
import signal
from pathlib import Path

import pytest

# Every document the suite writes (in this process and in the ncclcheck processes it starts) is
# validated against its schema first: a writer that drifts from its schema fails the test.
os.environ.setdefault("NCCLCHECK_VALIDATE_WRITES", "1")


def _terminated(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# A run stopped at its time limit (SIGTERM) ends as an interrupted one: fixtures' finalizers and
# atexit hooks run, so namespace clusters and their daemons do not outlive it (issue 28).
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _terminated)

FIXTURES = Path(__file__).parent / "fixtures"
HOSTS = FIXTURES / "hosts"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="Rewrite golden files from the current output.")


#: The niceness of the tests that run beside an ``alone`` one (see pytest_runtest_protocol).
BESIDE = 10


@functools.lru_cache(maxsize=None)
def alone_module(path: Path) -> bool:
    """Whether a test module's ``pytestmark`` holds ``pytest.mark.alone``."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
               and any(isinstance(n, ast.Attribute) and n.attr == "alone"
                       for n in ast.walk(node.value))
               for node in tree.body)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """README's ``--dist loadfile``, with one change: the modules marked ``alone`` form one unit
    of work. Each other module still goes whole to one worker (its fixtures are built once); one
    worker runs the alone modules one after another (the largest unit: it is handed out first),
    while the other runs the rest beside them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class AloneTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "alone" if alone_module(config.rootpath / module) else module

    return AloneTogether(config, log)


@contextlib.contextmanager
def _turn(folder: Path, alone: bool, deadline: bool):
    """Where a test runs beside an ``alone`` one. The alone tests hold a lock among themselves
    (they never overlap, even under another --dist), at nice 0. Every other test runs at nice 10,
    its child processes too: beside an alone test it takes the CPU that test leaves idle, and a
    tenth of a CPU both want (the kernel's weights for nice 10 and 0: 110 and 1024), so that
    test's timings stay its own. A ``deadline`` test (its assertion is a wall-clock limit
    of the command under test) runs at nice 0: it uses little CPU, and must not be starved.
    flock's lock goes with the process, so a killed worker frees it. Lowering the niceness
    back needs root (as the netns tests do): elsewhere, the tests keep nice 0."""
    nice = 0 if alone or deadline else BESIDE
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass
    with open(folder / "alone.lock", "a+") as lock:
        if alone:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if alone:
                fcntl.flock(lock, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, 0, 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist (README's test command), each test's setup, call and teardown, module
    fixtures included, run inside its turn. Without workers there is nothing to share."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    # The workers' base folders (popen-gwN) share their parent, inside pytest-of-*.
    folder = item.config._tmp_path_factory.getbasetemp().parent
    with _turn(folder, item.get_closest_marker("alone") is not None,
               item.get_closest_marker("deadline") is not None):
        yield


@pytest.fixture(autouse=True)
def _private_tmpdir(tmp_path_factory, monkeypatch):
    """Each test's child processes (ncclcheck, torchrun, srun's tasks) get a TMPDIR of their own
    under pytest's folder: rank logs a failing run keeps on purpose, and torch's
    ``torchelastic_*`` folders, land there instead of in the TMPDIR that .ci/run checks."""
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmpdir")))


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


def host_names():
    return sorted(p.name for p in HOSTS.iterdir() if p.is_dir()) if HOSTS.exists() else []


@pytest.fixture
def recorded():
    """Return a RecordedHost for a fixture host name."""
    from ncclcheck.host import RecordedHost

    return lambda name: RecordedHost(HOSTS / name)


@pytest.fixture
def console():
    """A rich console writing to a string (``console.file.getvalue()``)."""
    from rich.console import Console

    return Console(file=io.StringIO(), width=120, color_system=None, force_terminal=False)


def have_root_netns() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


# In CI (CI=true) nothing is skipped: a missing prerequisite fails the test instead of hiding it.
needs_netns = pytest.mark.skipif(not have_root_netns() and not os.environ.get("CI"),
                                 reason="needs root and iproute2")

#: Scripts the tests run as programs, not test modules: importing one under --doctest-modules
#: runs it (tests/jobdir/fault_job.py reads its rank from the environment at import).
collect_ignore = ["jobdir/fault_job.py"]
