"""gpu-p2p-unsupported judges only the pairs NCCL would use P2P for (issue 17), on the recorded
8x H100 host (NVLink between every pair) and its PCIe paths."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ncclcheck.rules import gpu_p2p_unsupported
from ncclcheck.rules.engine import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "recommend"))
import recommend_scenarios as scenarios  # noqa: E402


def h100(name, broken=(), path=None):
    """The recorded H100 node with P2P read off between the ``broken`` GPU pairs, and their
    path rewritten to ``path`` (a PCIe server's PHB/SYS/PXB) when given."""
    facts = json.loads(scenarios.replayed("h100-ib-8gpu"))
    facts["hostname"] = name
    gpu = facts["sections"]["gpu"]["data"]
    for i, j in broken:
        for a, b in ((i, j), (j, i)):
            gpu["p2p"]["read"][a][b] = "CNS"
            if path:
                gpu["topology"]["matrix"][a][b] = path
    gpu["p2p_all_supported"] = not broken
    return facts


def run(nodes):
    result = evaluate([gpu_p2p_unsupported.RULE], nodes)
    assert result["errors"] == [] and result["skipped"] == []
    return result["findings"]


def test_nvlink_pairs_without_p2p_are_an_error():
    [finding] = run([h100("n1"), h100("n2", broken=[(0, 3)])])
    assert finding["severity"] == "error" and finding["hosts"] == ["n2"]
    assert "GPU0-GPU3 read CNS (NV18)" in finding["message"]
    assert "P2P is disabled between NVLINK connected GPUs" in finding["message"]


def test_pcie_pairs_across_a_host_bridge_are_normal():
    assert run([h100("n1", broken=[(0, 4)], path="SYS"), h100("n2", broken=[(1, 2)], path="PHB"),
                h100("n3", broken=[(1, 5)], path="NODE")]) == []


def test_pairs_under_a_pcie_switch_warn():
    [finding] = run([h100("n1", broken=[(0, 1)], path="PXB")])
    assert finding["severity"] == "warning" and "(PXB)" in finding["message"]
