"""The committed report fixtures are what today's commands write (tests/fixtures/reports).

The documents are built by the real ``probe``, ``bench --import``, ``recommend`` and ``diagnose``
(regenerate.py); when one of those changes its output, this test names the documents that went
stale, so the goldens are never checked against documents no command writes any more.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from report_fixtures import REPORTS, SETS


@pytest.mark.slow
def test_fixture_documents_are_what_the_commands_write_today(tmp_path):
    out = subprocess.run([sys.executable, str(REPORTS / "regenerate.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.glob("*/*.json"))
    committed = sorted(p.relative_to(REPORTS) for name in SETS
                       for p in (REPORTS / name).glob("*.json"))
    assert fresh == committed
    stale = [str(rel) for rel in fresh
             if json.loads((tmp_path / rel).read_text()) != json.loads((REPORTS / rel).read_text())]
    assert not stale, (f"stale report fixtures {stale}: run python3 tests/fixtures/reports/"
                       "regenerate.py, then pytest tests/report/test_report_golden.py "
                       "--update-golden, and read the diff")
