"""The env file against the cluster's own facts (issue 17): no line in any format turns off a
transport that every node reports as working.

The test judges "working" from the facts directly, not through the rules' helpers: a node's
RDMA fabric works unless the facts say otherwise (an ACTIVE port, libibverbs not known to fail,
/dev/infiniband not known to be missing). Inconclusive facts count as working: they must never
produce a downgrade. Clusters: every recommend scenario (recorded hosts), every rule fixture,
and the hazard cases of the issue.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ncclcheck.cluster import cluster_document
from ncclcheck.envformat import FORMATS
from ncclcheck.recommend.document import recommend
from ncclcheck.recommend.text import render_output

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS / "recommend"))
import recommend_scenarios as scenarios  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import test_net_transport as hazards  # noqa: E402

FACTS = TESTS / "fixtures" / "facts"


def _data(node, name):
    sec = node["sections"].get(name) or {}
    return sec.get("data") if sec.get("status") == "ok" else None


def fabric_works(node) -> bool:
    """An RDMA port is ACTIVE and nothing in the facts says verbs cannot reach it."""
    ib = _data(node, "ib") or {}
    active = any(p.get("state") == "ACTIVE" for d in ib.get("devices") or []
                 for p in d.get("ports") or [])
    verbs = (_data(node, "nccl") or {}).get("ibverbs") or {}
    visible = (ib.get("dev_infiniband") or {}).get("visible")
    return active and verbs.get("loaded") is not False and visible is not False


def downgrades(env: dict[str, str]) -> list[str]:
    out = []
    if env.get("NCCL_IB_DISABLE", "0").strip() not in ("", "0"):
        out.append("NCCL_IB_DISABLE")
    if env.get("NCCL_NET", "").strip().lower() == "socket":
        out.append("NCCL_NET=Socket")
    if env.get("NCCL_NET_PLUGIN", "").strip().lower() == "none":
        out.append("NCCL_NET_PLUGIN=none")
    return out


_LINE = re.compile(r"^(?:export\s+)?(NCCL_[A-Z0-9_]+)=(.*)$")


def rendered_env(doc, fmt) -> dict[str, str]:
    """What a consumer of the ``fmt`` output gets (comment lines are not settings)."""
    text = render_output(doc, fmt)
    if fmt == "json":
        return json.loads(text)["env"]
    out = {}
    for line in text.splitlines():
        if (m := _LINE.match(line)):
            out[m.group(1)] = m.group(2).strip("'\"")
    return out


def clusters():
    for name in scenarios.scenario_names():
        yield f"scenario:{name}", lambda name=name: scenarios.assemble(name)
    for path in sorted(FACTS.glob("*.json")):
        def load(path=path):
            data = json.loads(path.read_text())
            return cluster_document(data if isinstance(data, list) else [data], [], source="t")
        yield f"fixture:{path.stem}", load
    cases = {
        "hazard-1": lambda: [hazards.ib_node("n1", 1), hazards.inconclusive(hazards.ib_node("n2", 2))],
        "hazard-2": lambda: [hazards.efa_node("n1", 1, False), hazards.efa_node("n2", 2, False)],
        "ib-and-roce": lambda: [hazards.ib_node("n1", 1), roce_node()],
    }
    for name, make in cases.items():
        yield f"case:{name}", lambda make=make: cluster_document(make(), [], source="t")


def roce_node():
    fx = hazards.fx
    return fx.node("n2", network=fx.two_eth(2), nccl=fx.nccl(), env=fx.env(), ib=fx.ib(
        fx.device("mlx5_0", fx.port(layer="Ethernet", rate=100, netdev="eth0", gid_index=3))))


CLUSTERS = dict(clusters())


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_no_setting_turns_off_a_fabric_every_node_reports_working(name):
    cluster = CLUSTERS[name]()
    nodes = cluster["nodes"]
    doc = recommend(cluster)
    if not all(fabric_works(n) for n in nodes):
        pytest.skip("some node reports its fabric broken or absent")
    for fmt in FORMATS:
        assert downgrades(rendered_env(doc, fmt)) == [], (fmt, doc["reasons"])


def test_the_hazard_cases_are_held_against_the_check():
    # the check above must judge these clusters (a skip would hide a regression)
    for name in ("case:hazard-1", "case:hazard-2", "case:ib-and-roce", "scenario:h100-ib-pair"):
        assert all(fabric_works(n) for n in CLUSTERS[name]()["nodes"]), name
    assert downgrades({"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}) == [
        "NCCL_IB_DISABLE", "NCCL_NET=Socket"]
    assert rendered_env({"env": {"NCCL_NET": "Socket"}, "reasons": {}, "findings": [],
                         "conflicts": [], "ties": [], "withheld": [], "refused": [],
                         "hosts": ["a"], "env_overrides": []}, "shell") == {"NCCL_NET": "Socket"}
