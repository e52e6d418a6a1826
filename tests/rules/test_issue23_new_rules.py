"""Issue 23's new rules, beyond the registry's pass/fail check: each fail fixture node gets the
finding its case deserves, with the fix that applies to it."""

from __future__ import annotations

import json
from pathlib import Path

from ncclcheck.rules import ALL_RULES
from ncclcheck.rules.engine import evaluate

FACTS = Path(__file__).parent.parent / "fixtures" / "facts"
BY_ID = {r.id: r for r in ALL_RULES}


def findings(rule_id: str, kind: str = "fail") -> list[dict]:
    nodes = json.loads((FACTS / f"{rule_id}.{kind}.json").read_text())
    rule = BY_ID[rule_id]
    groups = [[n] for n in nodes] if rule.scope == "node" else [nodes]
    return [f for g in groups for f in evaluate([rule], g)["findings"]]


def test_mnnvl_names_each_cause_on_its_tray():
    got = {f["hosts"][0] if len(f["hosts"]) == 1 else "all": f for f in findings("cluster-mnnvl-not-ready")}
    assert got["tray01"]["severity"] == "error" and "nvidia-imex" in got["tray01"]["message"]
    assert got["tray02"]["severity"] == "error" and "channel0" in got["tray02"]["fix"]
    assert got["all"]["severity"] == "warning" and "clique 3" in got["all"]["message"]
    assert got["tray04"]["severity"] == "warning" and "2.19.3" in got["tray04"]["message"]


def test_ll128_sizes_of_nvidia_nccl_1739():
    by_host = {f["hosts"][0]: f for f in findings("env-ll128-buffsize")}
    assert by_host["nccl-1739"]["severity"] == "error"          # 131072: not a multiple of 120
    assert by_host["nccl-1739-hang"]["severity"] == "warning"   # 123000 = 120 x 1025
    assert "122880" in by_host["nccl-1739"]["fix"]


def test_mig_instances_in_the_job_are_an_error():
    by_host = {f["hosts"][0]: f["severity"] for f in findings("gpu-mig-enabled")}
    assert by_host == {"mig-on": "warning", "mig-instances": "error"}


def test_ras_and_diagnostics_are_info_only():
    found = findings("nccl-ras-diagnostics")
    assert {f["severity"] for f in found} == {"info"} and not any(f["env"] for f in found)
    assert {f["hosts"][0] for f in found} == {"host-1", "ras-off"}
