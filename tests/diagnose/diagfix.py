"""Helpers shared by the diagnose tests (imported as ``from diagfix import findings_of``)."""

from __future__ import annotations

from ncclcheck.logparse.state import LogState


def findings_of(*lines: str) -> dict[str, dict]:
    """The findings of ``lines`` fed to one log state, by id (no line may fail to parse)."""
    state = LogState()
    for n, line in enumerate(lines, 1):
        state.feed(line, "t.log", n)
    assert state.parse_errors == 0, state.first_parse_error
    return {fid: acc.as_dict() for fid, acc in state.findings.items()}
