"""Every recorded host reproduces its golden facts.json exactly.

Refresh after a deliberate change: ``python3 -m pytest tests/test_golden.py --update-golden``,
then read the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck import schema
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probe import collect_facts
from ncclcheck.record import normalise

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
NAMES = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())


@pytest.mark.parametrize("name", NAMES)
def test_golden_facts(name, update_golden):
    folder = HOSTS / name
    doc = normalise(collect_facts(RecordedHost(folder)))
    golden = folder / "facts.json"
    if update_golden or not golden.exists():
        schema.dump(doc, golden)
        if not update_golden:
            pytest.fail(f"{golden} was missing and has been written; check it in")
    assert json.loads(schema.dumps(doc)) == json.loads(golden.read_text())


@pytest.mark.parametrize("name", NAMES)
def test_recorded_host_has_provenance(name):
    readme = HOSTS / name / "README.md"
    assert readme.exists(), "every recorded host says where it came from"
