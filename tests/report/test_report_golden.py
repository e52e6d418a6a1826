"""Each fixture document set renders to its golden Markdown, byte for byte.

Refresh after a deliberate change: ``python3 -m pytest tests/report/test_report_golden.py
--update-golden``, then read the diff.
"""

from __future__ import annotations

import pytest

from report_fixtures import REPORTS, SETS, documents
from ncclcheck import __version__
from ncclcheck.report.page import make_report

GENERATED_AT = "2026-11-21T12:00:00Z"


def rendered(name: str) -> str:
    text = make_report(documents(name), "md", generated_at=GENERATED_AT)
    return text.replace(f"ncclcheck {__version__}", "ncclcheck VERSION")


@pytest.mark.parametrize("name", SETS)
def test_markdown_matches_golden(name, update_golden):
    golden = REPORTS / f"{name}.md"
    text = rendered(name)
    if update_golden or not golden.exists():
        golden.write_text(text)
        if not update_golden:
            pytest.fail(f"{golden} was missing and has been written; check it in")
    assert text == golden.read_text()


@pytest.mark.parametrize("name", SETS)
def test_markdown_tables_are_well_formed(name):
    """Every table row has as many cells as its header (GitHub drops rows that do not)."""
    lines = rendered(name).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---") or line.startswith("|---:"):
            width = cells(lines[i - 1])
            for row in lines[i + 1:]:
                if not row.startswith("|"):
                    break
                assert cells(row) == width, row


def cells(row: str) -> int:
    return len(row.replace("\\|", "").strip().strip("|").split("|"))
