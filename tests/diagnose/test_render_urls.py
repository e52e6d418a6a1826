"""diagnose at 80 columns: a citation wraps only after a '/' or between citations, never inside
a name (issue 27 item 11: 'nccl-ib-t' / 'imeout')."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"


def test_citations_are_never_split_inside_a_name_at_80_columns():
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "diagnose",
                          str(LOGS / "ib-completion-error-12.log")], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    words = out.stdout.replace("│", " ").split()
    assert "env.html#nccl-ib-timeout;" in words, out.stdout
    assert "https://github.com/NVIDIA/nccl/issues/902" in words
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
