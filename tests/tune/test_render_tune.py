"""tune's terminal output: a rich bar on a terminal, one line per run otherwise, the summary."""

from __future__ import annotations

import io

from rich.console import Console
from test_tune_document import build

from ncclcheck.render.tune import LineProgress, RichProgress, progress_for, render_summary
from ncclcheck.tune.command import Quiet

CAND = {"id": "x", "label": "NCCL_SOCKET_IFNAME==ens1f0"}
RUN = {"peak_busbw_gbps": 0.04791, "wall_s": 7.1, "error": None}


def console(terminal):
    return Console(file=io.StringIO(), force_terminal=terminal, width=120)


def test_terminal_gets_the_bar_and_each_figure():
    con = console(True)
    progress = progress_for(con, quiet=False)
    assert isinstance(progress, RichProgress)
    progress.start(2)
    progress.running("round 1/3: NCCL_SOCKET_IFNAME==ens1f0")
    progress.run_done(CAND, RUN)
    progress.run_done(CAND, {**RUN, "error": "rank 1 on node2: timed out"})
    progress.stop()
    out = con.file.getvalue()
    assert "0.04791 GB/s peak busbw" in out and "failed (rank 1 on node2: timed out)" in out


def test_a_pipe_gets_one_line_per_run_and_quiet_nothing():
    con = console(False)
    progress = progress_for(con, quiet=False)
    assert type(progress) is LineProgress
    progress.start(2)
    progress.note("probing every node")
    progress.running("round 1/3")
    progress.run_done(CAND, RUN)
    progress.run_done(CAND, {**RUN, "same_run_as": "baseline"})  # a run another candidate ran
    assert con.file.getvalue().splitlines() == [
        "tune: probing every node",
        "tune: [1/2] NCCL_SOCKET_IFNAME==ens1f0: 0.04791 GB/s peak busbw (7.1 s)",
        "tune: [2/2] NCCL_SOCKET_IFNAME==ens1f0: 0.04791 GB/s peak busbw (7.1 s, the run of "
        "baseline)"]
    assert isinstance(progress_for(con, quiet=True), Quiet)


def test_summary_shows_the_candidates_side_by_side():
    _, _, doc = build()
    con = console(False)
    render_summary(con, doc)
    out = con.file.getvalue()
    for label in ("NCCL's defaults", "NCCL_SOCKET_IFNAME==ens1f0", "NCCL_SOCKET_IFNAME==ens2f0"):
        assert label in out
    assert "WINNER" in out and "skipped: gloo ignores NCCL_NSOCKS_PERTHREAD" in out
    assert "decision: x2 over the baseline" in out
