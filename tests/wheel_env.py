"""The built wheel, installed as a user would: fresh virtual environments for packaging tests.

Each environment is ``python -m venv`` (never ``--system-site-packages``), so it holds only what
the wheel declares and pip fetches: a module that imports something undeclared fails there,
however much the developer's own Python holds. The wheel is built once per test session from a
copy of the source tree (the checkout stays untouched), with pip's ordinary build isolation::

    from wheel_env import installed   # tests/ is on sys.path through conftest.py

    def test_x(tmp_path_factory):
        env = installed(tmp_path_factory, bench=False)
        env.run([env.bin / "ncclcheck", "--version"], cwd=tmp_path)

``installed(..., bench=True)`` adds the ``[bench]`` extra with torch pinned as
scripts/install-test-deps pins it (the CPU build). Environments are cached for the session,
and pytest-xdist's workers share them (:func:`shared`).

The venvs are made ``--without-pip`` and pip runs into them from the tests' own Python
(``pip --python VENV/bin/python``, pip >= 22.3): pip re-runs itself under the venv's interpreter,
so it installs and checks exactly as the venv's own pip would, without ensurepip unpacking pip
(and, before Python 3.12, setuptools) into every venv first (~7 CPU-s each). A venv holding less
than a user's is only stricter: a module that needed setuptools would fail here too.

Unpacking torch's wheel (700 MB, 14,000 files) took three minutes of a loaded CI box, so when
the Python running the tests holds the pinned torch, its files and those of what it requires (as their RECORDs list
them) are hard-linked into the fresh venv first: pip then finds them installed, checks them
against the pin and ncclcheck's requirements, and installs the rest as for a user.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("setup.py", "setup.cfg", "pyproject.toml", "README.md", "ncclcheck", "report_templates")
INSTALL_TIMEOUT_S = 600
_CACHE: dict[Any, Any] = {}


def torch_pin() -> str:
    """The torch requirement scripts/install-test-deps installs (``torch==X.Y.Z``)."""
    text = (ROOT / "scripts" / "install-test-deps").read_text()
    match = re.search(r"^TORCH='([^']+)'", text, re.M)
    assert match, "scripts/install-test-deps sets TORCH='torch==...'"
    return match.group(1)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that points Python at another installation."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(extra)
    return env


def run(argv: list[Any], cwd: Path, timeout: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` (paths allowed); fail the test with its stderr unless it exits 0."""
    out = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout, env=env or clean_env())
    assert out.returncode == 0, f"{argv}: {out.stdout[-1500:]}{out.stderr[-3000:]}"
    return out


@contextlib.contextmanager
def shared(factory: Any, name: str):
    """A folder ``name`` made once per test session: under pytest-xdist, the workers share it
    (the first builds it while the others wait on its lock), so the wheel and each venv are
    built once, not once per worker. Yields the folder and whether it still has to be built."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                    # popen-gwN's parent: every worker's
    folder = base / f"wheel-env-{name}"
    with open(base / f"wheel-env-{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / ".built"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)   # a worker killed half-way left it
            folder.mkdir()
            yield folder, True
            done.touch()
        else:
            yield folder, False


def wheel(factory: Any) -> Path:
    """The ncclcheck wheel built from a copy of this tree (once per session)."""
    if "wheel" not in _CACHE:
        with shared(factory, "wheel") as (base, build):
            if build:
                _build_wheel(base)
            (_CACHE["wheel"],) = (base / "dist").glob("ncclcheck-*.whl")
    return _CACHE["wheel"]


def _build_wheel(base: Path) -> None:
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "-q", "-w", base / "dist"],
        cwd=base, timeout=INSTALL_TIMEOUT_S)


@dataclasses.dataclass
class Venv:
    """A fresh virtual environment with the wheel installed."""

    path: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def pip(self, *args: Any) -> list[Any]:
        """argv of ``pip ARGS`` acting on this environment (see the module's docstring)."""
        return [sys.executable, "-m", "pip", "--python", self.python, *args]

    def run(self, argv: list[Any], cwd: Path, timeout: float = 120,
            **env: str) -> subprocess.CompletedProcess:
        """Run with this environment's bin first on PATH."""
        path = f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"
        return run(argv, cwd, timeout, clean_env(PATH=path, **env))


def torch_closure() -> list[importlib.metadata.Distribution]:
    """This interpreter's torch and what it requires (markers evaluated, extras left out), when
    torch is the pinned build; else nothing."""
    try:
        torch = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return []
    if f"torch=={torch.version.split('+')[0]}" != torch_pin():
        return []
    found, todo = {}, [torch]
    while todo:
        dist = todo.pop()
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = dist
        for req in dist.requires or []:
            name, _, marker = req.partition(";")
            if "extra" in marker or (marker.strip() and not _marker_holds(marker)):
                continue
            try:
                todo.append(importlib.metadata.distribution(re.split(r"[ <>=!~\[(]", name)[0]))
            except importlib.metadata.PackageNotFoundError:
                pass
    return list(found.values())


def _marker_holds(marker: str) -> bool:
    """A requirement's environment marker (``python_version >= "3.12"``) on this Python."""
    try:
        from packaging.markers import Marker  # pip's own vendored copy is not importable
    except ImportError:
        return True                           # linking one package too many costs nothing
    return Marker(marker.strip()).evaluate()


def seed_torch(venv: Venv, cwd: Path) -> None:
    """Hard-link this interpreter's torch, and what it requires, into ``venv`` when it is the
    pinned build (else do nothing and pip unpacks the wheels). Only files under site-packages:
    console scripts (``../../../bin/torchrun``) carry this interpreter's path and are left out."""
    dists = torch_closure()
    if not dists:
        return
    purelib = Path(run([venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                        "['purelib'])"], cwd=cwd).stdout.strip())
    for dist in dists:
        for name in dist.files or []:
            src, dst = Path(dist.locate_file(name)), purelib / name
            if name.parts[0] == ".." or not src.is_file() or dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)


def installed(factory: Any, bench: bool) -> Venv:
    """A fresh venv holding the wheel (with ``[bench]`` and pinned torch when ``bench``)."""
    if bench not in _CACHE:
        built = wheel(factory)
        with shared(factory, "venv-bench" if bench else "venv") as (where, build):
            venv = Venv(where / "v")
            if build:
                run([sys.executable, "-m", "venv", "--without-pip", venv.path], cwd=where)
                if bench:
                    seed_torch(venv, where)
                requirement = f"ncclcheck[bench] @ {built.as_uri()}" if bench else str(built)
                run([*venv.pip("install", "-q", requirement),
                     *([torch_pin()] if bench else [])], cwd=where, timeout=INSTALL_TIMEOUT_S)
        _CACHE[bench] = venv
    return _CACHE[bench]
