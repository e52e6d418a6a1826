"""tune's measuring loop (:func:`ncclcheck.tune.command.measure`) with bench's run replaced by
a table of what each interface measures: which runs are started, which are shared."""

from __future__ import annotations

import pytest

from ncclcheck.tune import command
from ncclcheck.tune.candidates import gloo_interfaces

IFNAME = "NCCL_SOCKET_IFNAME"
#: busbw each interface gives, per run in turn (a run that routes with no variable uses eth0)
GBPS = {"eth0": [4.0, 4.1, 4.05, 4.02, 4.08], "eth1": [1.0, 1.1, 1.05, 1.02]}


def nic(name, addr):
    return {"name": name, "ipv4": [{"address": addr}]}


NODES = [{"sections": {"network": {"status": "ok", "data": {"interfaces": [
    nic("lo", "127.0.0.1"), nic("eth0", f"198.18.0.{i}"), nic("eth1", f"198.18.1.{i}")]}}}}
    for i in (11, 12)]


def candidates():
    def cand(cid, env):
        return {"id": cid, "label": cid, "stage": 1, "env": env, "measure": True}

    return [cand("baseline", {}), cand("recommended", {IFNAME: "=eth0,eth1"}),
            cand("eth0", {IFNAME: "=eth0"}), cand("eth1", {IFNAME: "=eth1"})]


@pytest.fixture
def bench(monkeypatch):
    started = []
    taken = {k: list(v) for k, v in GBPS.items()}

    def bench_once(req, env, clock, session=None):
        spec = env.get(IFNAME, "")
        used = spec.lstrip("=").split(",")[0] if spec else "eth0"
        started.append(used)
        figure = taken[used].pop(0)
        return {"peak_busbw_gbps": figure, "avg_busbw_gbps": figure, "error": None,
                "wall_s": 1.0, "backend": "gloo", "network": "Socket", "interfaces": [used],
                "wrong_total": 0}

    monkeypatch.setattr(command, "bench_once", bench_once)
    return started


def run(resolves):
    cands = candidates()
    rounds = []
    command.measure(cands, command.TuneRequest(hostfile="h"), command.Clock(600),
                    command.Quiet(), "baseline", rounds, resolves)
    return {c["id"]: c for c in cands}


def test_candidates_bench_resolves_to_the_baselines_interface_share_its_run_from_round_1(bench):
    """The rules' list and =eth0 both become GLOO_SOCKET_IFNAME=eth0 on every node, the
    interface the baseline's run used: from round 1 they repeat the baseline's run (5 runs: 2,
    2, 1), where observing their own runs first took 7 (4, 2, 1)."""
    resolves = gloo_interfaces(candidates(), NODES)
    assert resolves == {"recommended": "eth0", "eth0": "eth0", "eth1": "eth1"}
    by_id = run(resolves)
    assert bench == ["eth0", "eth1", "eth0", "eth1", "eth0"]
    for cid in ("recommended", "eth0"):
        assert [r["same_run_as"] for r in by_id[cid]["runs"]] == ["baseline"] * 3
        assert by_id[cid]["figures"] == by_id["baseline"]["figures"] == [4.0, 4.1, 4.05]
    assert [r["round"] for r in by_id["eth1"]["runs"]] == [1, 2]
    assert by_id["eth1"]["stopped"].startswith("stopped early")
    assert all(len({r["round"] for r in c["runs"]}) == len(c["runs"]) for c in by_id.values())


def test_without_resolving_each_runs_once_before_sharing(bench):
    """What tune did before (and does for a candidate bench cannot resolve from the facts):
    every candidate's own run in round 1, one shared run from round 2."""
    by_id = run({})
    assert bench == ["eth0", "eth0", "eth0", "eth1", "eth0", "eth1", "eth0"]
    assert [r.get("same_run_as") for r in by_id["eth0"]["runs"]] == [None, "baseline", "baseline"]


def test_a_candidate_resolving_elsewhere_is_measured_on_its_own(bench):
    """A prediction never stands for a run of another interface: =eth1 resolves to eth1, no run
    of eth1 has been made in round 1, so it runs itself."""
    by_id = run({"eth1": "eth1"})
    assert [r.get("same_run_as") for r in by_id["eth1"]["runs"]] == [None, None]
