"""The templates ship in the wheel: a non-editable install in a fresh venv renders a report.

The venv is :mod:`wheel_env`'s: ``python -m venv`` without the system site-packages, the wheel
installed with its declared dependencies, so a dependency the wheel forgets to declare (rich,
once) fails here as it would for a user. It runs from a folder outside the source tree.
"""

from __future__ import annotations

import zipfile

import pytest
from wheel_env import installed, wheel

from report_fixtures import documents


@pytest.mark.slow
def test_wheel_install_renders_a_report(tmp_path, tmp_path_factory):
    names = zipfile.ZipFile(wheel(tmp_path_factory)).namelist()
    assert "ncclcheck/report_templates/report.html.j2" in names
    assert "ncclcheck/report_templates/partials/macros.html.j2" in names
    assert not any(n.startswith("report_templates/") for n in names), "nothing at top level"

    venv = installed(tmp_path_factory, bench=False)
    where = venv.run([venv.python, "-c", "import ncclcheck.report.page as r; print(r.__file__); "
                                         "print(r.template_dir())"], cwd=tmp_path).stdout.split()
    assert all(p.startswith(str(venv.path)) for p in where), where

    out = venv.run([venv.bin / "ncclcheck", "report", *documents("roce-compare"), "-o",
                    "report.html"], cwd=tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<polyline" in page, out.stderr
    md = venv.run([venv.bin / "ncclcheck", "report", *documents("cloud-vm"), "--format", "md"],
                  cwd=tmp_path).stdout
    assert md.startswith("# NCCL report: 1 node (cloud-vm-01)")
