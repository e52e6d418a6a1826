"""The templates ship in the wheel: a non-editable install in a fresh venv renders a report.

The wheel is built from a copy of the source tree (so the checkout is left untouched) without
network access (``--no-build-isolation``: setuptools is already here), installed with
``--no-deps --no-index`` into a venv that sees this interpreter's packages for click, rich and
jinja2, and run from a folder outside the source tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from report_fixtures import documents

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("setup.py", "setup.cfg", "pyproject.toml", "README.md", "ncclcheck", "report_templates")


def run(argv, cwd, timeout=120):
    out = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, f"{argv}: {out.stderr[-3000:]}"
    return out


@pytest.mark.slow
def test_wheel_install_renders_a_report(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", dist], cwd=tmp_path)
    (wheel,) = dist.glob("ncclcheck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ncclcheck/report_templates/report.html.j2" in names
    assert "ncclcheck/report_templates/partials/macros.html.j2" in names
    assert not any(n.startswith("report_templates/") for n in names), "nothing at top level"

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
        cwd=tmp_path)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([python, "-c", "import ncclcheck.report.page as r; print(r.__file__); "
                               "print(r.template_dir())"], cwd=elsewhere).stdout.split()
    assert all(p.startswith(str(venv)) for p in where), where

    out = run([venv / "bin" / "ncclcheck", "report", *documents("roce-compare"), "-o",
               "report.html"], cwd=elsewhere)
    page = (elsewhere / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<polyline" in page, out.stderr
    md = run([venv / "bin" / "ncclcheck", "report", *documents("cloud-vm"), "--format", "md"],
             cwd=elsewhere).stdout
    assert md.startswith("# NCCL report: 1 node (cloud-vm-01)")
