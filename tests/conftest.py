"""Shared fixtures: recorded hosts, a captured console, and the CLI runner."""

from __future__ import annotations

import contextlib
import fcntl
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


@contextlib.contextmanager
def _turn(folder: Path, alone: bool):
    """A readers-writer lock across pytest-xdist's workers, with the writer first: an ``alone``
    test takes the turnstile, waits for the tests running beside it to end, and runs by itself;
    other tests pass the turnstile and share the lock. flock's locks go with the process, so a
    killed worker frees them."""
    with open(folder / "alone.turnstile", "a+") as gate, open(folder / "alone.lock", "a+") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


#: Whether the test running now runs by itself: marked ``alone`` under pytest-xdist, or any test
#: without workers (see :func:`running_alone`).
_ALONE_NOW = [True]


def running_alone() -> bool:
    """Whether the test being set up or run now has the machine to itself. The mark goes per
    test: a module whose tests share a fixture may hold both timed and untimed tests, and a
    fixture whose figures are timings of the shared CPU asserts this, so that it is never set up
    by an untimed test running beside others (should the tests' order change)."""
    return _ALONE_NOW[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist (README's test command), each test's setup, call and teardown, module
    fixtures included, run inside its turn. Without workers there is nothing to share."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    # The workers' base folders (popen-gwN) share their parent, inside pytest-of-*.
    folder = item.config._tmp_path_factory.getbasetemp().parent
    alone = item.get_closest_marker("alone") is not None
    with _turn(folder, alone):
        _ALONE_NOW[0] = alone
        try:
            yield
        finally:
            _ALONE_NOW[0] = True


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
    from ncclcheck.host.recorded import RecordedHost

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
