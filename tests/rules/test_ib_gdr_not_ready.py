"""ib-gdr-not-ready by NCCL version: nvidia_peermem is seen only from 2.23 on (issue 17)."""

from __future__ import annotations

import pytest

from ncclcheck.rules import ib_gdr_not_ready
from ncclcheck.rules.engine import evaluate


def node(version, dmabuf=False, nv_peer_mem=False):
    gdr = {"peermem": True, "nv_peer_mem": nv_peer_mem, "dmabuf": dmabuf, "ready": True,
           "reason": "nvidia_peermem is loaded"}
    nccl = {"versions": [version] if version else [], "torch_loads": None, "system_loads": None}
    return {"hostname": "n1", "sections": {
        "gpu": {"status": "ok", "data": {"gpus": [{"index": 0}]}},
        "ib": {"status": "ok", "data": {"devices": [{"name": "mlx5_0"}], "gdr": gdr}},
        "env": {"status": "ok", "data": {"nccl": {}}},
        "nccl": {"status": "ok", "data": nccl}}}


@pytest.mark.parametrize("version, kw, fires", [
    ("2.21.5", {}, True), ("2.22.3", {}, True),      # memory_peers/nv_mem[_nc] only
    ("2.23.4", {}, False),                            # /sys/module/nvidia_peermem seen
    ("2.22.3", {"dmabuf": True}, False),              # DMA-BUF carries GDR anyway
    ("2.22.3", {"nv_peer_mem": True}, False),         # the legacy module is seen
    (None, {}, False),                                # unknown version: not guessed at
])
def test_peermem_needs_nccl_2_23(version, kw, fires):
    result = evaluate([ib_gdr_not_ready.RULE], [node(version, **kw)])
    assert result["skipped"] == [] and result["errors"] == []
    assert bool(result["findings"]) is fires
    if fires:
        assert "nccl#1676" in result["findings"][0]["message"]


def efa_node(plugin="/opt/amazon/ofi-nccl/lib/libnccl-net.so", names=None, env=None):
    """An AWS p5 as issue 23 saw it: 32 EFA devices (rdmap<bus>s0), aws-ofi-nccl, and
    efa_nv_peermem instead of nvidia_peermem, so NCCL's own IB check reads 'not ready'."""
    names = names or [f"rdmap{b}s0" for b in range(32)]
    gdr = {"peermem": False, "nv_peer_mem": False, "dmabuf": None, "ready": False,
           "reason": "no nvidia_peermem or nv_peer_mem module"}
    return {"hostname": "p5", "sections": {
        "gpu": {"status": "ok", "data": {"gpus": [{"index": i} for i in range(8)]}},
        "ib": {"status": "ok", "data": {"devices": [{"name": n} for n in names], "gdr": gdr}},
        "env": {"status": "ok", "data": {"nccl": env or {}}},
        "nccl": {"status": "ok", "data": {"versions": ["2.21.5"], "torch_loads": None,
                                          "system_loads": None,
                                          "net_plugin": {"path": plugin}}}}}


def test_efa_only_and_plugin_nodes_are_not_judged_by_nccls_ib_check():
    rule = [ib_gdr_not_ready.RULE]
    assert evaluate(rule, [efa_node()])["findings"] == []
    assert evaluate(rule, [efa_node(plugin=None)])["findings"] == []  # EFA-only
    # an external plugin on mlx5 (e.g. gIB): the plugin registers memory itself
    assert evaluate(rule, [efa_node(names=["mlx5_0"])])["findings"] == []
    # ... unless NCCL_NET=IB bypasses it, and without a plugin NCCL's IB check decides
    assert evaluate(rule, [efa_node(names=["mlx5_0"], env={"NCCL_NET": "IB"})])["findings"]
    assert evaluate(rule, [efa_node(plugin=None, names=["mlx5_0"])])["findings"]


def test_dgx_spark_has_no_gdr_by_design():
    """GB10 (DGX Spark): no nvidia-peermem, no DMA-BUF, by design (DGX Spark porting guide):
    `modprobe nvidia-peermem` would be wrong advice. A discrete GPU beside it keeps the check."""
    spark = efa_node(plugin=None, names=["rocep1s0f1", "roceP2p1s0f1"])
    spark["sections"]["gpu"]["data"]["gpus"] = [{"index": 0, "name": "NVIDIA GB10"}]
    assert evaluate([ib_gdr_not_ready.RULE], [spark])["findings"] == []
    spark["sections"]["gpu"]["data"]["gpus"] = [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]
    (f,) = evaluate([ib_gdr_not_ready.RULE], [spark])["findings"]
    assert "not ready" in f["message"]
