"""Round orders, early stop, the significance decision and the budget clock."""

from __future__ import annotations

import itertools
import time

import pytest

from ncclcheck.bench.sweep import parse_budget
from ncclcheck.tune import plan
from ncclcheck.tune.command import Clock


def test_every_candidate_runs_first_and_last_and_pairs_swap():
    ids = list("abcde")
    orders = [plan.round_order(ids, r) for r in range(5)]
    assert all(sorted(o) == ids for o in orders)
    assert {o[0] for o in orders} == set(ids)
    assert len({o[-1] for o in orders}) >= 3
    for x, y in itertools.combinations(ids, 2):  # neither always runs before the other
        before = {o.index(x) < o.index(y) for o in orders}
        assert before == {True, False}, (x, y)


def test_a_clearly_worse_candidate_stops_the_baseline_never():
    figures = {"base": [1.0, 1.05], "fast": [4.0, 4.1], "slow": [0.5, 0.6], "close": [3.9, 4.2]}
    stop = plan.clearly_worse(figures, "base")
    assert set(stop) == {"slow"}
    assert "base" not in plan.clearly_worse({"base": [0.1, 0.1], "fast": [4.0, 4.1]}, "base")
    assert plan.clearly_worse({"base": [1.0], "slow": [0.1]}, "base") == {}  # one round only


def cand(cid, figures, env):
    return {"id": cid, "figures": figures, "env": env}


def test_a_winner_must_clear_the_noise_of_the_baseline():
    base = cand("baseline", [2.0, 2.3, 1.9], {})
    noisy = cand("x", [2.2, 2.6, 2.0], {"NCCL_SOCKET_IFNAME": "=a"})
    d = plan.decide([base, cand("recommended", [2.1, 2.1, 2.2], {"V": "=a,b"}), noisy],
                    "baseline", "recommended")
    assert d == {"id": "recommended", "significant": False, "why": d["why"]}
    assert d["why"].startswith("no significant difference")


def test_of_two_winners_within_noise_the_simpler_env_is_kept():
    base = cand("baseline", [1.0, 1.0, 1.0], {})
    two = cand("two", [4.0, 4.3, 4.1], {"NCCL_SOCKET_IFNAME": "=a,b"})
    one = cand("one", [4.0, 4.2, 3.9], {"NCCL_SOCKET_IFNAME": "=a"})
    d = plan.decide([base, two, one], "baseline", "recommended")
    assert d["id"] == "one" and d["significant"] and "simpler" in d["why"]
    far = cand("far", [8.0, 8.1, 8.2], {"NCCL_SOCKET_IFNAME": "=a,b,c"})
    assert plan.decide([base, far, one], "baseline", "recommended")["id"] == "far"


def test_no_baseline_measured_keeps_the_rules():
    d = plan.decide([cand("x", [5.0, 5.0], {})], "baseline", "recommended")
    assert d["id"] == "recommended" and not d["significant"]


@pytest.mark.parametrize("text", ["", "0", "-5m", "10 minutes", "1d"])
def test_bad_budgets(text):
    with pytest.raises(ValueError, match="--budget"):
        parse_budget(text)


def test_the_clock_refuses_a_run_that_does_not_fit():
    clock = Clock(30.0)
    assert clock.fits() and clock.stopped is None
    clock.walls.append(40.0)  # a run took longer than what is left
    assert not clock.fits() and "budget" in clock.stopped
    short = Clock(3.0)
    assert not short.fits()
    clock = Clock(1000.0)
    clock.started = time.monotonic() - 990
    assert not clock.fits()
