"""The final recommendation (any --format) and the tune document against its JSON Schema."""

from __future__ import annotations

import copy
import json

import pytest
from tunefix import cluster

from ncclcheck.envformat import parse_env_text
from ncclcheck.recommend.document import recommend
from ncclcheck.tune.command import Clock, TuneRequest, render_env
from ncclcheck.tune.document import final_recommendation, tune_document
from ncclcheck.tune.candidates import first_stage, socket_stage

FIG = {"baseline": [1.0, 1.02, 0.99], "recommended": [1.0, 1.01],
       "NCCL_SOCKET_IFNAME==eno1": [1.0, 1.01], "NCCL_SOCKET_IFNAME==ens1f0": [2.0, 2.02, 1.98],
       "NCCL_SOCKET_IFNAME==ens2f0": [0.5, 0.49]}


def measured():
    doc = cluster()
    rec = recommend(doc, [])
    cands = first_stage(rec, doc["nodes"], "gloo")
    for c in cands:
        c["figures"] = FIG[c["id"]]
        c["runs"] = [{"round": i + 1, "position": 1, "peak_busbw_gbps": f, "avg_busbw_gbps": f,
                      "wall_s": 1.0, "error": None, "interfaces": []}
                     for i, f in enumerate(c["figures"])]
    cands += socket_stage(cands[3]["env"], "gloo", "Socket")
    return doc, rec, cands


def build(significant=True):
    doc, rec, cands = measured()
    winner = cands[3] if significant else cands[1]
    decision = {"id": winner["id"], "significant": significant, "why": "x2 over the baseline"}
    final = final_recommendation(rec, winner, decision)
    tdoc = tune_document(TuneRequest(hostfile="h"), rec, doc["nodes"], "gloo", "Socket", cands,
                         [{"stage": 1, "round": 1, "order": [c["id"] for c in cands[:5]]}],
                         decision, winner, final, Clock(600), {"ok": True, "problems": []})
    return rec, final, tdoc


def test_the_winner_replaces_the_rules_value_and_says_why():
    rec, final, _ = build()
    assert rec["env"]["NCCL_SOCKET_IFNAME"] == "=eno1,ens1f0,ens2f0"
    assert final["env"]["NCCL_SOCKET_IFNAME"] == "=ens1f0"
    first = final["reasons"]["NCCL_SOCKET_IFNAME"][0]
    assert first["rule"] == "tune" and "x2 over the baseline" in first["message"]
    assert final["ties"][0]["decided_by"] == "tune"
    text = render_env(final, "env")
    assert parse_env_text(text)["NCCL_SOCKET_IFNAME"] == "=ens1f0"


def test_no_significant_difference_keeps_the_rules_env():
    rec, final, tdoc = build(significant=False)
    assert final["env"] == rec["env"]
    assert tdoc["winner"]["significant"] is False


@pytest.mark.parametrize("fmt", ["env", "shell", "deepspeed", "json"])
def test_every_recommend_format(fmt):
    _, final, _ = build()
    text = render_env(final, fmt)
    assert "=ens1f0" in text and "eno1,ens1f0" not in text.split("NCCL_SOCKET_IFNAME", 1)[1][:20]
    if fmt == "json":
        assert json.loads(text)["env"]["NCCL_SOCKET_IFNAME"] == "=ens1f0"


def test_the_document_has_spreads_ratios_and_is_valid():
    from ncclcheck.errors import BadInput
    from ncclcheck.validate import validate

    _, _, tdoc = build()
    tdoc = json.loads(json.dumps(tdoc))
    validate(tdoc, "tune.json")
    by_id = {c["id"]: c for c in tdoc["candidates"]}
    assert by_id["NCCL_SOCKET_IFNAME==ens1f0"]["vs_baseline"] == 2.0
    assert by_id["NCCL_SOCKET_IFNAME==ens1f0"]["spread"]["min_gbps"] == 1.98
    assert by_id["threads=2x4"]["measure"] is False and by_id["threads=2x4"]["spread"] is None
    broken = copy.deepcopy(tdoc)
    broken["candidates"][0]["figures"] = ["fast"]
    with pytest.raises(BadInput, match=r"tune.json: \$.candidates\[0\].figures\[0\] must be number"):
        validate(broken, "tune.json")
    del broken["winner"]
    with pytest.raises(BadInput, match="winner"):
        validate(broken, "tune.json")


def test_the_schema_describes_the_shared_runs():
    """``same_run_rule`` (settings) and ``same_run_as`` (a run recorded for a candidate that
    another candidate's run stood for, :func:`ncclcheck.tune.plan.same_run`) are typed in the
    shipped schema: a document that gets them wrong is refused (the schema admits unknown keys,
    so before they were described anything passed)."""
    from ncclcheck.errors import BadInput
    from ncclcheck.tune import plan
    from ncclcheck.validate import validate

    _, _, tdoc = build()
    tdoc = json.loads(json.dumps(tdoc))
    assert tdoc["settings"]["same_run_rule"] == plan.SAME_RUN_RULE
    tdoc["candidates"][1]["runs"][1]["same_run_as"] = "baseline"
    validate(tdoc, "tune.json")
    for path, bad, message in (
            (("candidates", 1, "runs", 1, "same_run_as"), 3, "same_run_as must be string"),
            (("candidates", 1, "runs", 1, "same_run_as"), "", "same_run_as"),
            (("settings", "same_run_rule"), ["x"], "same_run_rule must be string")):
        broken = copy.deepcopy(tdoc)
        where = broken
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = bad
        with pytest.raises(BadInput, match=message):
            validate(broken, "tune.json")
