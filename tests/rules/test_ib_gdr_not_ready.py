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
