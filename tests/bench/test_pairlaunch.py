"""The hunt's launch side without a network: options, names, restarts after a failed node."""

from __future__ import annotations

import types

import pytest

from ncclcheck.bench import pairlaunch
from ncclcheck.bench.command import BenchRequest
from ncclcheck.bench.monitor import Failure
from ncclcheck.errors import BadInput
from ncclcheck.hostfile import load_hostfile
from ncclcheck.pairwise import schedule


def test_options_are_sendrecv_at_e_one_rank_per_node_with_the_plan():
    opts = pairlaunch.pairwise_options(BenchRequest(max_bytes="2M", iters=3, rounds=3,
                                                    given=("max_bytes", "iters")), 16)
    assert opts.op == "sendrecv" and opts.check == 0 and opts.procs is None
    assert opts.pairwise == {"rounds": 3, "size_bytes": 2 << 20, "max_bytes": 2 << 20,
                             "pair_s": 1.0, "iters": 3, "warmup": None, "budget_s": 600.0,
                             "latency_bytes": 8, "latency_iters": 10, "seed": 0}
    assert len(opts.sizes) == 3 + pairlaunch.CONFIRM_ALLOWANCE  # the deadline grows with rounds
    assert opts.worker_spec("gloo")["pairwise"] == opts.pairwise


def test_by_default_a_pair_is_measured_for_a_time_at_a_probed_size_within_the_budget():
    """No -e/-n/--timeout: no fixed size or count (a time per pair, the size probed), the
    collective timeout the hunt's own; a tight budget shortens the time per pair; one the
    rounds cannot fit is refused in one line."""
    opts = pairlaunch.pairwise_options(BenchRequest(), 8)
    pw = opts.pairwise
    assert pw["size_bytes"] is None and pw["iters"] is None and pw["warmup"] is None
    assert pw["pair_s"] == pairlaunch.PAIR_S and pw["max_bytes"] == 128 << 20
    assert opts.timeout == pairlaunch.PAIRWISE_TIMEOUT_S
    tight = pairlaunch.pairwise_options(BenchRequest(budget="75s"), 8).pairwise["pair_s"]
    assert 0.1 <= tight < 1.0
    with pytest.raises(BadInput, match="--budget 1m: 4095 rounds"):
        pairlaunch.pairwise_options(BenchRequest(budget="1m"), 4096)
    with pytest.raises(BadInput, match="--budget 'soon'"):
        pairlaunch.pairwise_options(BenchRequest(budget="soon"), 8)
    given = pairlaunch.pairwise_options(BenchRequest(timeout=20, given=("timeout",)), 8)
    assert given.timeout == 20


def test_the_options_count_the_rounds_without_building_them(monkeypatch):
    """Refusing --budget 1m for 4096 nodes built the 4095 rounds of 2048 pairs only to count
    them (most of a minute); the count is :func:`schedule.plan_length`, the same as the plan's."""
    assert [schedule.plan_length(n, r) for n in (2, 3, 8, 9) for r in (None, 1, 5, 99)] == \
        [len(schedule.plan(n, r)) for n in (2, 3, 8, 9) for r in (None, 1, 5, 99)]

    def built(*args, **kwargs):
        raise AssertionError("the options built the schedule")

    monkeypatch.setattr(schedule, "plan", built)
    monkeypatch.setattr(schedule, "circle_rounds", built)
    with pytest.raises(BadInput, match="--budget 1m: 4095 rounds"):
        pairlaunch.pairwise_options(BenchRequest(budget="1m"), 4096)
    assert len(pairlaunch.pairwise_options(BenchRequest(rounds=24), 4096).sizes) == \
        24 + pairlaunch.CONFIRM_ALLOWANCE


def test_out_of_time_pairs_are_the_first_unfinished_round_and_reported_slow(tmp_path):
    """A launch that failed on timeouts with every node alive: the pairs of its first
    unfinished round ran out of time; the document lists them as out of time, not missing."""
    from ncclcheck.pairwise.document import build

    stuck = pairlaunch.out_of_time([[(0, 1), (2, 3)], [(0, 2), (1, 3)]], {(0, 1): {}},
                                   [0, 1, 2, 3], 60)
    assert list(stuck) == [(2, 3)] and stuck[(2, 3)]["out_of_time"]
    pairs = [{"round": 0, "a": 0, "b": 1, "gbps": 1.0}, {**stuck[(2, 3)]}]
    doc = build({"pairs": pairs, "rounds": [[(0, 1), (2, 3)]], "size_bytes": None},
                ["a", "b", "c", "d"], None)
    assert doc["out_of_time"][0]["hosts"] == ["c", "d"] and doc["missing_pairs"] == []


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
    opts = pairlaunch.pairwise_options(BenchRequest(max_bytes="1M", hostfile=str(hostfile),
                                                    given=("max_bytes",)), 4)
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
