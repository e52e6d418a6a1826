"""The hunt's launch side without a network: options, names, restarts after a failed node."""

from __future__ import annotations

import types

import pytest

from ncclcheck.bench import pairlaunch
from ncclcheck.bench.command import BenchRequest
from ncclcheck.bench.launch import Failure
from ncclcheck.errors import BadInput
from ncclcheck.hostfile import load_hostfile
from ncclcheck.pairwise import schedule


def test_options_are_sendrecv_at_e_one_rank_per_node_with_the_plan():
    opts = pairlaunch.pairwise_options(BenchRequest(max_bytes="2M", rounds=3), 16)
    assert opts.op == "sendrecv" and opts.check == 0 and opts.procs is None
    assert opts.pairwise == {"rounds": 3, "size_bytes": 2 << 20, "latency_bytes": 8,
                             "latency_iters": 10, "seed": 0}
    assert len(opts.sizes) == 3 + pairlaunch.CONFIRM_ALLOWANCE  # the deadline grows with rounds
    assert opts.worker_spec("gloo")["pairwise"] == opts.pairwise


def test_rounds_zero_is_refused():
    with pytest.raises(BadInput, match="at least 1"):
        pairlaunch.pairwise_options(BenchRequest(rounds=0), 4)


def test_the_culprit_is_the_most_likely_cause():
    monitor = types.SimpleNamespace(failures=[Failure(3, "peer closed", 0),
                                              Failure(1, "killed by signal 9", 3),
                                              Failure(6, "no progress", None)])
    assert pairlaunch.culprit(monitor) == 3
    assert pairlaunch.culprit(types.SimpleNamespace(failures=[Failure(6, "x")])) is None


def test_restart_measures_the_missing_pairs_on_the_nodes_left(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# fleet\nnode1\nroot@node2:2222\nnode3 slots=1\nnode4\n")
    targets = load_hostfile(str(hostfile))
    opts = pairlaunch.pairwise_options(BenchRequest(max_bytes="1M", hostfile=str(hostfile)), 4)
    alive = [0, 1, 3]  # node3 failed
    todo = [(0, 1), (0, 3), (1, 3)]
    again = pairlaunch.restart_options(opts, str(hostfile), targets, alive, todo, str(tmp_path))
    assert open(again.hostfile).read() == "node1\nroot@node2:2222\nnode4\n"
    rounds = again.pairwise["schedule"]
    assert sorted(tuple(p) for r in rounds for p in r) == [(0, 1), (0, 2), (1, 2)]
    schedule.check_disjoint([[tuple(p) for p in r] for r in rounds])


def test_merged_reports_a_failed_nodes_pairs_as_missing(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a\nb\nc\nd\n")
    targets = load_hostfile(str(hostfile))
    plan = schedule.plan(4)
    done = {(0, 1): {"round": 0, "a": 0, "b": 1, "gbps": 1.0},
            (0, 3): {"round": 1, "a": 0, "b": 3, "gbps": 1.0},
            (1, 3): {"round": 2, "a": 1, "b": 3, "gbps": 1.0}}
    opts = pairlaunch.pairwise_options(BenchRequest(max_bytes="1M"), 4)
    raw = pairlaunch.merged(plan, done, targets, {"backend": "gloo"}, opts, failed=[2])
    missing = [(p["a"], p["b"]) for p in raw["pairs"] if p["gbps"] is None]
    assert sorted(missing) == [(0, 2), (1, 2), (2, 3)]
    assert raw["hosts"] == ["a", "b", "c", "d"] and raw["launch"]["restarts"] == 1
