"""ncclcheck.bench.launch without processes: planning, the master address, the watch's limits."""

from __future__ import annotations

import pytest

from ncclcheck.bench.launch import (
    check_master_addr,
    choose_backend,
    plan_node,
)
from ncclcheck.bench.options import (
    BenchOptions,
    run_deadline,
    stall_limit,
)
from ncclcheck.errors import BadInput


def test_master_addr_must_belong_to_the_first_node():
    check_master_addr("198.18.0.11", ["198.18.0.11", "10.0.0.5"], "node1")
    check_master_addr("127.0.0.1", ["198.18.0.11"], "node1")       # one node: loopback is fine
    check_master_addr("node1.cluster", ["198.18.0.11"], "node1")   # names: the resolver's job
    check_master_addr("198.18.0.99", None, "node1")                # an old agent: not checked
    with pytest.raises(BadInput, match=r"198\.18\.0\.12 is not an address of node1.*"
                                       r"\(it has 198\.18\.0\.11\)"):
        check_master_addr("198.18.0.12", ["198.18.0.11"], "node1")


@pytest.mark.parametrize("warmup, iters, timeout", [(5, 20, 300.0), (1, 2000, 5.0), (0, 1, 1.0)])
def test_the_watch_allows_a_whole_block_of_ops_each_within_timeout(warmup, iters, timeout):
    """--timeout bounds each collective; a block of many ops, each a little under it, is
    healthy and must not be called a stall (it was, with a limit of --timeout + 10 s)."""
    opts = BenchOptions(warmup=warmup, iters=iters, timeout=timeout, sizes=[8, 16, 32])
    block = timeout * (warmup + iters + 1)           # warm-up, timed ops and the barrier
    assert stall_limit(opts) > block
    # the nodes' backstop outlasts every size's two placements, plus start-up
    assert run_deadline(opts) > 2 * len(opts.sizes) * stall_limit(opts) + timeout


def test_backend_and_ranks_per_node():
    assert choose_backend("auto", [{"gpus": 8}, {"gpus": 8}]) == "nccl"
    assert choose_backend("auto", [{"gpus": 8}, {"gpus": 0}]) == "gloo"
    assert choose_backend("gloo", [{"gpus": 8}]) == "gloo"
    opts = BenchOptions()
    assert plan_node(opts, {"gpus": 8}, None, "n1", "nccl", True) == 8
    assert plan_node(opts, {"gpus": 0}, None, "n1", "gloo", True) == 1
    assert plan_node(opts, {"gpus": 0}, None, "n1", "gloo", False) == 2
    assert plan_node(opts, {"gpus": 0}, 3, "n1", "gloo", True) == 3          # slots=3
    with pytest.raises(BadInput, match="4 ranks asked for but 2 GPUs visible"):
        plan_node(BenchOptions(procs=4), {"gpus": 2}, None, "n1", "nccl", True)
