"""Terminal rendering of every corpus diagnosis (ncclcheck/render/diagnose.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files
from ncclcheck.render.diagnose import render_diagnosis

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


@pytest.mark.parametrize("name", sorted(p.stem for p in LOGS.glob("*.log")))
def test_renders_verdict_and_every_finding(name, console):
    doc = diagnose_files([str(LOGS / f"{name}.log")])
    render_diagnosis(console, doc)
    text = console.file.getvalue()
    assert doc["summary"]["verdict"].split(":")[0] in text
    for f in doc["findings"]:
        assert f["id"] in text and f["severity"].upper() in text
    if not doc["findings"]:
        assert "No findings." in text
