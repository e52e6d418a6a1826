"""Writable copies of recorded hosts for the network and ib probe tests."""

from __future__ import annotations

import shutil
from pathlib import Path

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def copy_host(name: str, tmp_path: Path) -> Path:
    """A writable copy of the parts of a fixture host the network and ib probes read."""
    src, dst = HOSTS / name, tmp_path / name
    for part in ("root/sys", "root/proc", "queries", "commands"):
        if (src / part).is_dir():
            shutil.copytree(src / part, dst / part, symlinks=True)
    for meta in ("links.json", "listings.json", "paths.json"):
        if (src / meta).exists():
            shutil.copy(src / meta, dst / meta)
    return dst
