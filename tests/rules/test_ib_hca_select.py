"""ib-hca-select: a port that negotiated down on one node is reported and kept (issue 17)."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.rules import ib_hca_select
from ncclcheck.rules.engine import evaluate

from scriptload import load

fx = load(Path("tests/fixtures/facts/make_cluster_rule_fixtures.py"), "cluster_rule_fixtures")


def node(i, rates):
    devs = [fx.device(f"mlx5_{k}", fx.port(rate=r)) for k, r in enumerate(rates)]
    return fx.node(f"n{i}", ib=fx.ib(*devs), nccl=fx.nccl(), env=fx.env(), network=fx.two_eth(i))


def run(nodes):
    result = evaluate([ib_hca_select.RULE], nodes)
    assert result["errors"] == [] and result["skipped"] == []
    return result["findings"]


def test_a_port_that_negotiated_down_is_reported_not_dropped():
    findings = run([node(1, (400, 400, 400)), node(2, (400, 200, 400)), node(3, (400, 400, 400))])
    [degraded] = findings
    assert degraded["severity"] == "warning" and degraded["hosts"] == ["n2"]
    assert "mlx5_1:1 at 200 Gb/s (elsewhere 400)" in degraded["message"]
    assert degraded["env"] == {}  # every node keeps all three ports: nothing to pin


def test_a_front_end_nic_slow_on_every_node_is_still_left_out():
    [finding] = run([node(1, (400, 400, 100)), node(2, (400, 400, 100))])
    assert finding["env"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}


def test_a_degraded_port_beside_a_front_end_nic_stays_in_the_list():
    findings = run([node(1, (400, 400, 100)), node(2, (400, 200, 100))])
    pin = [f for f in findings if f["env"]]
    assert [f["env"] for f in pin] == [{"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}]
    assert any("negotiated down" in f["message"] for f in findings)
