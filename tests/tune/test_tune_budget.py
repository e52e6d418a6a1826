"""What ``tune --budget`` hands each run: a deadline no later than the end of the budget's
measuring share (note24: "--budget 45s took 84 s at load 20", because a run started near the end
kept bench's own backstop of many minutes), and a run that the end stops is cut and said."""

from __future__ import annotations

import re

import pytest

from ncclcheck.bench.options import run_deadline
from ncclcheck.tune import command


def clock_with(budget, left):
    """A budget clock with ``left`` seconds left for measuring (its reserve kept back)."""
    clock = command.Clock(budget)
    clock.started -= budget - min(command.RESERVE_S, budget * 0.1) - left
    return clock


def test_each_run_gets_at_most_what_is_left_of_the_budget():
    req = command.TuneRequest(hostfile="hosts")   # tune's defaults: 1M-2M, 1 warm-up, 4 iters
    fresh = command.run_options(req, {}, clock_with(600.0, 500.0))
    assert 499.0 <= run_deadline(fresh) <= 500.0
    quick = command.run_options(command.TuneRequest(hostfile="hosts", timeout=1.0), {},
                                clock_with(600.0, 500.0))
    assert quick.deadline_s is None and run_deadline(quick) == 480.0   # bench's own backstop
    late = command.run_options(req, {}, clock_with(45.0, 12.0))
    assert 11.0 <= run_deadline(late) <= 12.0                       # not bench's 800 s and more
    last = command.run_options(req, {}, clock_with(45.0, 0.5))
    assert run_deadline(last) == command.MIN_RUN_S


@pytest.mark.parametrize("own, left, deadline", [(840.0, 12.0, 12.0), (9.0, 12.0, 9.0),
                                                 (840.0, 2.0, 5.0), (840.0, -3.0, 5.0)])
def test_the_deadline_is_a_function_of_what_is_left(own, left, deadline):
    assert command.capped(own, left) == deadline


def test_verify_gets_what_is_left_of_the_whole_budget_at_least_10_s():
    assert 40 <= clock_with(600.0, 20.0).verify_timeout() <= 40.1   # 20 s + the 20 s reserve
    assert clock_with(45.0, -30.0).verify_timeout() == command.MIN_VERIFY_S


@pytest.mark.slow
@pytest.mark.torch
def test_a_run_the_end_of_the_budget_stops_is_cut_and_said(monkeypatch, tmp_path):
    """A real local run (the agent under its watchdog, 2 gloo ranks) started with 1.5 s left:
    the watchdog stops it there, the run is recorded as cut and the measuring ends."""
    pytest.importorskip("torch")
    monkeypatch.setenv("TMPDIR", str(tmp_path))   # the failed run's kept rank logs go here
    monkeypatch.setattr(command, "MIN_RUN_S", 1.0, raising=False)
    clock = clock_with(100.0, 1.5)
    run = command.bench_once(command.TuneRequest(procs=2, backend="gloo"), {}, clock)
    assert "stopped by the remote deadline" in str(run["error"]), run   # not run to its end
    cut = re.match(re.escape(command.CUT) + r" \(its deadline: (1\.[0-5]) s\): ", run["error"])
    assert cut, run["error"]
    assert f"stopped by the remote deadline ({cut.group(1)} s)" in run["error"]
    assert clock.stopped and command.CUT in clock.stopped


def test_the_nodes_start_up_check_counts_against_the_deadline(tmp_path):
    """The start-up check that begins a run over ssh (``agent --hello`` on each node) gets the
    run's cap (tune: what is left of --budget), not ssh's connect timeout + 30 s. A node whose
    ssh never answers (a ProxyCommand that only sleeps: the real ssh, hanging as on a host
    that drops SYNs) stops a run capped at 2 s within seconds, where the old check waited
    --connect-timeout (20 s here) or more."""
    import dataclasses
    import time

    from ncclcheck.bench.launch import run_multi_node
    from ncclcheck.bench.options import BenchOptions
    from ncclcheck.errors import NcclcheckError

    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ProxyCommand sleep 60\n  BatchMode yes\n")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node-that-hangs\n")
    opts = dataclasses.replace(BenchOptions(connect_timeout=20), hostfile=str(hostfile), nodes=1,
                               ssh_config=str(config), deadline_s=2.0)
    started = time.monotonic()
    with pytest.raises(NcclcheckError) as err:
        run_multi_node(opts, None)
    assert time.monotonic() - started < 10, err.value
    assert "node-that-hangs" in str(err.value)
