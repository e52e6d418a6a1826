"""The shipped table of expected busbw: every class sourced, the issue's classes present, the
ranges in agreement with the real nccl-tests tables kept as fixtures, ``ncclcheck expected``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.bench.importer import import_file
from ncclcheck.expected import table
from ncclcheck.expected.verdict import measured

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"

#: Each real nccl-tests table among the fixtures, the class it belongs to (the text's GPUs and
#: transport) and the --op where the output does not say (the EKS README cut the header).
FIXTURE_CLASSES = {
    "superbench-a100-8gpu-all_gather.log": ("nvlink-a100-8", None),
    "superbench-a100-8gpu-alltoall.log": ("nvlink-a100-8", None),
    "superbench-a100-8gpu-broadcast.log": ("nvlink-a100-8", None),
    "superbench-a100-8gpu-reduce_scatter.log": ("nvlink-a100-8", None),
    "eks-efa-t4-2node-mpi-tagged.txt": ("efa-g4dn", "all_reduce"),
    "a3mega-h100-2x8-all_reduce.txt": ("gcp-tcpxo", None),  # A3 Mega: the class's own source
}


def test_every_class_has_a_source_url_and_a_range():
    classes = table.classes()
    assert len(classes) >= 12
    assert table.problems(classes) == []
    assert len({c["id"] for c in classes}) == len(classes)
    for c in classes:
        assert c["sources"] and all(s["url"].startswith("https://") for s in c["sources"]), c["id"]
        assert c["holds_for"] and c["min_bytes"] > 0


def test_problems_refuses_an_entry_without_a_source():
    entry = dict(table.by_id("ib-ndr"), sources=[])
    assert table.problems([entry]) == ["ib-ndr: no source with an https URL"]


def test_the_issue_classes_are_all_there():
    ids = {c["id"] for c in table.classes()}
    wanted = {"nvlink-a100-2-4", "nvlink-a100-8", "nvlink-hopper-2-4", "nvlink-h100-8",
              "nvlink-h200-8", "nvlink-b200-8", "nvlink-gb200-nvl72", "pcie-gen4-p2p",
              "pcie-gen5-p2p", "pcie-sys-shm", "ib-hdr", "ib-ndr", "roce-100", "roce-200",
              "roce-400", "efa-p4d", "efa-p5", "efa-p5en", "gcp-tcpx", "gcp-tcpxo", "tcp-10",
              "tcp-25", "tcp-100"}
    assert wanted <= ids
    for nic_class in ("ib-hdr", "ib-ndr"):
        assert table.by_id(nic_class)["nics"] == [1, 4, 8]


@pytest.mark.parametrize("name", sorted(FIXTURE_CLASSES))
def test_ranges_agree_with_the_real_tables(name):
    """The fixture's peak busbw over the sizes its class holds for lies in the class's range
    (on two nodes, up to the network rate as algbw: see ncclcheck.expected.verdict)."""
    class_id, op = FIXTURE_CLASSES[name]
    doc = import_file(FIX / name, op)
    entry = table.by_id(class_id)
    value, size, _ = measured(doc, entry["min_bytes"])
    assert size >= entry["min_bytes"]
    low, high = table.node_range(entry, nics=8)
    if len(doc["nodes"]) == 2 and entry["kind"] not in ("nvlink", "pcie"):
        high *= 2 * (doc["world_size"] - 1) / doc["world_size"]
    assert low <= value <= high, (name, value, low, high)
    assert doc["op"] in entry["collectives"] or entry["kind"] != "nvlink"


def test_expected_lists_every_class_with_its_sources():
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "expected"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for c in table.classes():
        assert f"\n{c['id']} " in out.stdout
        for s in c["sources"]:
            assert f"source: {s['url']} -- " in out.stdout
    js = subprocess.run([sys.executable, "-m", "ncclcheck", "expected", "ib-ndr", "--json"],
                        capture_output=True, text=True, timeout=60)
    assert js.returncode == 0 and [c["id"] for c in json.loads(js.stdout)] == ["ib-ndr"]
    bad = subprocess.run([sys.executable, "-m", "ncclcheck", "expected", "nvlink-z9"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown class 'nvlink-z9'" in bad.stderr
    assert "Traceback" not in bad.stderr
