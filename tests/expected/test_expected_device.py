"""The lent H200's own bench document (tests/fixtures/device/h200, recorded by
scripts/device-check with one GPU, world size 1): no class, and the verdict says why -- busbw is 0
with one rank by nccl-tests' definition -- instead of calling the GPU low. Skipped where the
recording is not in the tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck.expected.verdict import expect

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "device" / "h200"


@pytest.mark.skipif(not (H200 / "bench.json").exists(), reason="no H200 recording in this tree")
def test_one_h200_gets_no_class_and_says_a_second_rank_is_missing():
    doc = json.loads((H200 / "bench.json").read_text())
    facts = [json.loads((H200 / "probe.json").read_text())] if (H200 / "probe.json").exists() else []
    exp = expect(doc, facts)
    assert doc["world_size"] == 1
    assert exp["class"] is None and exp["verdict"] is None and exp["limits"] == []
    assert exp["missing"][0].startswith("a second rank: with one rank busbw is 0")
