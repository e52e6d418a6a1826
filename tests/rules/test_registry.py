"""Conformance of the rule registry: metadata, citations, fixtures, and honest ``reads``."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest

import ncclcheck.rules as rules_pkg
from ncclcheck.probes import PROBES
from ncclcheck.rules import ALL_RULES, CLUSTER_RULES, NODE_RULES
from ncclcheck.rules.common import PEER_READS
from ncclcheck.rules.engine import evaluate

FACTS = Path(__file__).parent.parent / "fixtures" / "facts"
RULE_ID = re.compile(r"^[a-z][a-z0-9-]{3,39}$")


def load(rule, kind):
    path = FACTS / f"{rule.id}.{kind}.json"
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


def test_ids_unique_and_well_formed():
    ids = [r.id for r in ALL_RULES]
    assert len(ids) == len(set(ids))
    for rule in ALL_RULES:
        assert RULE_ID.match(rule.id), rule.id
        assert rule.scope in ("node", "cluster")


def test_every_rule_module_is_registered():
    helpers = {"base", "engine", "common", "firewall_walk", "hostroute", "vendors"}  # Rule, engine, helpers
    modules = {m.name for m in pkgutil.iter_modules(rules_pkg.__path__)} - helpers
    registered = {r.id.replace("-", "_") for r in ALL_RULES}
    assert modules == registered
    for rule in ALL_RULES:
        mod = importlib.import_module(f"ncclcheck.rules.{rule.id.replace('-', '_')}")
        assert mod.RULE is rule


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_metadata_cites_nccl(rule):
    assert rule.title and len(rule.title) <= 72
    assert rule.why and rule.fix
    assert rule.docs.startswith("https://"), "every rule cites NCCL docs or source"
    assert all(v.startswith(("NCCL_", "TORCH_NCCL_")) for v in rule.sets)
    for path in rule.reads:
        assert path.split(".")[0] in PROBES, f"{rule.id} reads unknown section {path}"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_pass_fixture_is_quiet_and_fail_fixture_fires(rule):
    passed = evaluate([rule], load(rule, "pass"))
    failed = evaluate([rule], load(rule, "fail"))
    assert passed["errors"] == [] and failed["errors"] == []
    assert passed["skipped"] == [] and failed["skipped"] == []
    assert passed["findings"] == []
    assert failed["findings"] and all(f["rule"] == rule.id for f in failed["findings"])


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_reads_are_honest(rule):
    """The fail fixture cut down to the declared sections gives the same findings."""
    declared = {p.split(".")[0] for p in rule.reads + (PEER_READS if rule.peers else ())}
    nodes = load(rule, "fail")
    pruned = [{**n, "sections": {k: v for k, v in n["sections"].items() if k in declared}}
              for n in nodes]
    assert evaluate([rule], pruned)["findings"] == evaluate([rule], nodes)["findings"]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_missing_facts_skip_with_reason(rule):
    empty = [{"hostname": "n1", "sections": {}}]
    result = evaluate([rule], empty)
    assert result["findings"] == [] and result["errors"] == []
    assert result["skipped"] and "not collected" in result["skipped"][0]["reason"]


def test_node_and_cluster_registries_match_scope():
    assert all(r.scope == "node" for r in NODE_RULES)
    assert all(r.scope == "cluster" for r in CLUSTER_RULES)
