"""tune holds the interface list it would write against what was measured (issue 27, item 1):
a member measured clearly slower alone leaves the list, a list measured on one interface says
so, and nothing is labelled a winner when nothing won (table and report)."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from test_tune_document import measured

from ncclcheck.render.tune import render_summary
from ncclcheck.report.tune import tune_view
from ncclcheck.tune.command import Clock, TuneRequest, hold_list, render_env
from ncclcheck.tune.document import final_recommendation, tune_document
from ncclcheck.tune import plan

IF = "NCCL_SOCKET_IFNAME"
#: the issue's figures: the baseline (gloo on the hostfile's link) as fast as the fast link
#: alone, the slow link alone at a quarter, the list measured on its first member only
FIG = {"baseline": [2.0, 2.02, 1.99], "recommended": [2.0, 2.01, 2.0],
       "NCCL_SOCKET_IFNAME==eno1": [2.0, 2.01, 1.98],
       "NCCL_SOCKET_IFNAME==ens1f0": [2.01, 2.0, 1.99],
       "NCCL_SOCKET_IFNAME==ens2f0": [0.5, 0.49, 0.51]}


def run_tune_decision(figures, used=None):
    doc, rec, cands = measured()
    stage1 = [c for c in cands if c["stage"] == 1]
    for c in stage1:
        c["figures"] = figures[c["id"]]
        for r in c["runs"]:
            r["interfaces"] = used.get(c["id"], []) if used else []
    decision = plan.decide([c for c in stage1 if c["figures"]], "baseline", "recommended")
    winner = next(c for c in stage1 if c["id"] == decision["id"])
    winner, decision = hold_list(winner, decision, stage1)
    final = final_recommendation(rec, winner, decision)
    tdoc = tune_document(TuneRequest(hostfile="h"), rec, doc["nodes"], "gloo", "Socket", cands,
                         [], decision, winner, final, Clock(600), None)
    return rec, decision, final, json.loads(json.dumps(tdoc))


def test_a_member_measured_clearly_slower_alone_leaves_the_list():
    rec, decision, final, tdoc = run_tune_decision(FIG)
    assert rec["env"][IF] == "=eno1,ens1f0,ens2f0"
    assert not decision["significant"] and decision["trimmed"] == ["ens2f0"]
    assert final["env"][IF] == "=eno1,ens1f0"
    assert "loses ens2f0: ens2f0 alone measured a median 0.5 GB/s" in decision["why"]
    assert "was not measured as a list" in decision["why"]
    assert "NCCL_SOCKET_IFNAME==eno1,ens1f0" in render_env(final, "env")
    assert tdoc["winner"]["trimmed"] == ["ens2f0"] and tdoc["env"][IF] == "=eno1,ens1f0"


def test_two_slow_members_leave_and_the_list_becomes_the_measured_single():
    figures = {**FIG, "NCCL_SOCKET_IFNAME==eno1": [1.0, 1.01, 0.99]}
    _, decision, final, tdoc = run_tune_decision(figures)
    assert final["env"][IF] == "=ens1f0" and sorted(decision["trimmed"]) == ["eno1", "ens2f0"]
    assert decision["id"] == "NCCL_SOCKET_IFNAME==ens1f0" and not decision["significant"]
    assert "not measured as a list" not in decision["why"]


def test_a_list_measured_on_one_interface_says_so():
    """No member is clearly slower (all equal alone), the list is kept, and the decision says
    gloo measured it on its first interface only."""
    figures = {**FIG, "NCCL_SOCKET_IFNAME==ens2f0": [2.0, 2.0, 2.01]}
    _, decision, final, tdoc = run_tune_decision(figures, used={"recommended": ["eno1"]})
    assert final["env"][IF] == "=eno1,ens1f0,ens2f0" and "trimmed" not in decision
    assert ("NCCL_SOCKET_IFNAME==eno1,ens1f0,ens2f0 was not measured as a list: its runs used "
            "eno1 only") in decision["why"]
    assert tdoc["winner"]["list_not_measured"] is True
    # the report shows the rules the decision used, the same-run rule among them
    assert tune_view(tdoc, "tune.json")["rules"] == [plan.EARLY_STOP_RULE, plan.SAME_RUN_RULE,
                                                     plan.SIGNIFICANCE_RULE]


@pytest.mark.parametrize("eno1", [FIG["NCCL_SOCKET_IFNAME==eno1"], [1.0, 1.01, 0.99]])
def test_nothing_is_labelled_winner_when_nothing_won(eno1):
    """The env written is a measured candidate (=ens1f0: marked kept) or a list of the members
    left (not a candidate of the table); either way no WINNER, in the table or the report."""
    _, _, final, tdoc = run_tune_decision({**FIG, "NCCL_SOCKET_IFNAME==eno1": eno1})
    con = Console(file=io.StringIO(), force_terminal=False, width=120)
    render_summary(con, tdoc)
    out = con.file.getvalue()
    assert "WINNER" not in out
    assert (" kept" in out) == (final["env"][IF] == "=ens1f0")
    view = tune_view(tdoc, "tune.json")
    assert not any(r["winner"] or r["status"] == "winner" for r in view["candidates"])


def test_a_significant_winner_is_still_labelled_and_keeps_its_single_interface():
    figures = {**FIG, "NCCL_SOCKET_IFNAME==ens1f0": [4.0, 4.1, 4.05]}
    _, decision, final, tdoc = run_tune_decision(figures)
    assert decision["significant"] and final["env"][IF] == "=ens1f0"
    con = Console(file=io.StringIO(), force_terminal=False, width=120)
    render_summary(con, tdoc)
    assert "WINNER" in con.file.getvalue()
