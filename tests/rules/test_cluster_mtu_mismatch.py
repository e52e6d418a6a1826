"""cluster-mtu-mismatch compares the RoCE ports' active MTU, not the netdev MTU (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.rules import cluster_mtu_mismatch
from ncclcheck.rules.engine import evaluate

from scriptload import load

fx = load(Path("tests/fixtures/facts/make_cluster_rule_fixtures.py"), "cluster_rule_fixtures")


def roce_node(i, mtu):
    port = fx.port(layer="Ethernet", rate=100, netdev="eth0", gid_index=3)
    return fx.node(f"n{i}", network=fx.two_eth(i, mtu=mtu), nccl=fx.nccl(),
                   ib=fx.ib(fx.device("mlx5_0", port)))


@pytest.mark.parametrize("mtus, fires", [
    ((9000, 4200), False),   # both give an active MTU of 4096
    ((9000, 9000), False),
    ((9000, 1500), True),    # 4096 against 1024
])
def test_roce_active_mtu(mtus, fires):
    found = evaluate([cluster_mtu_mismatch.RULE], [roce_node(i, m) for i, m in enumerate(mtus, 1)])
    assert found["skipped"] == [] and found["errors"] == []
    assert bool(found["findings"]) is fires
    if fires:
        [finding] = found["findings"]
        assert "active MTU of the RoCE ports" in finding["message"] and "1024" in finding["message"]
