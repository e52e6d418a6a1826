"""Helpers for the report tests: the fixture document sets and a CLI runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
SETS = sorted(p.name for p in REPORTS.iterdir() if p.is_dir() and p.name != "src")


def documents(name: str) -> list[str]:
    """The documents of one fixture set, in a fixed order."""
    return [str(p) for p in sorted((REPORTS / name).glob("*.json"))]


def run_cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    """``python -m ncclcheck ARGS`` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
