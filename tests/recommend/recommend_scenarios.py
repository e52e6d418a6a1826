"""Assemble scenario clusters from the recorded fixture hosts (tests/fixtures/hosts).

A scenario is ``tests/fixtures/clusters/<name>/cluster.json``::

    {"description": "two DGX H100 nodes",
     "nodes": [{"fixture": "h100-ib-8gpu", "hostname": "h100-node-01"},
               {"fixture": "h100-ib-8gpu", "hostname": "h100-node-02", "address_offset": 1,
                "set": {"nccl.ibverbs.loaded": false,
                        "ib.devices[name=mlx5_9].ports[0].state": "DOWN"}}]}

Each node is the facts document the probe writes when it replays the fixture host (the same
rooted reader as in production), renamed, with ``address_offset`` added to the last octet of
every IPv4 address that is not loopback or a container bridge (so nodes differ as real nodes do),
and then the ``set`` edits applied (paths into the sections' data; ``[name=X]`` picks the list
item whose ``name`` is X, ``[N]`` the N-th); ``"break": {"network": "<error>"}`` turns a
section into a failed probe. The golden files beside it are ``nccl.env`` (what
``recommend`` prints) and ``reasons.json`` (what it set, why, and what it found).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLUSTERS = FIXTURES / "clusters"
HOSTS = FIXTURES / "hosts"
_STEP = re.compile(r"^(?P<key>[^\[\]]+)?(?:\[(?P<sel>[^\]]+)\])?$")


def scenario_names() -> list[str]:
    return sorted(p.name for p in CLUSTERS.iterdir() if (p / "cluster.json").exists())


@cache
def replayed(fixture: str) -> str:
    """The facts document of a recorded host, as JSON text (probed once per test session)."""
    from ncclcheck.host.recorded import RecordedHost
    from ncclcheck.probe import collect_facts

    return json.dumps(collect_facts(RecordedHost(HOSTS / fixture)))


def _walk(node: Any, step: str) -> Any:
    match = _STEP.match(step)
    if not match:
        raise ValueError(f"bad path step {step!r}")
    if match.group("key"):
        node = node[match.group("key")]
    sel = match.group("sel")
    if sel is None:
        return node
    if sel.isdigit():
        return node[int(sel)]
    field, _, value = sel.partition("=")
    found = [item for item in node if str(item.get(field)) == value]
    if len(found) != 1:
        raise KeyError(f"{step}: {len(found)} items with {field}={value}")
    return found[0]


def _steps(path: str) -> list[str]:
    """Split a path at dots outside brackets: ``a[name=b.1].c`` -> ``['a[name=b.1]', 'c']``."""
    return re.findall(r"(?:[^.\[]|\[[^\]]*\])+", path)


def set_path(facts: dict[str, Any], path: str, value: Any) -> None:
    """Set ``section.key[sel].key`` inside a facts document's section data."""
    section, *steps = _steps(path)
    node = facts["sections"][section]["data"]
    for step in steps[:-1]:
        node = _walk(node, step)
    last = _STEP.match(steps[-1])
    if last.group("sel") is None:
        node[last.group("key")] = value
        return
    container = node[last.group("key")] if last.group("key") else node
    sel = last.group("sel")
    if sel.isdigit():
        container[int(sel)] = value
    else:
        target = _walk(container, f"[{sel}]")
        container[container.index(target)] = value


def shift_addresses(facts: dict[str, Any], offset: int) -> None:
    """Add ``offset`` to the last octet of IPv4 addresses of real interfaces."""
    net = facts["sections"].get("network", {}).get("data") or {}
    for iface in net.get("interfaces", []):
        if iface.get("kind") in ("loopback", "docker"):
            continue
        for addr in iface.get("ipv4", []):
            ip = ipaddress.IPv4Address(addr["address"]) + offset
            if ip not in ipaddress.ip_network(addr["subnet"]):
                raise ValueError(f"offset {offset} moves {addr['address']} out of {addr['subnet']}")
            addr["address"] = str(ip)


def assemble(name: str) -> dict[str, Any]:
    """The cluster document of scenario ``name``."""
    from ncclcheck.cluster import cluster_document

    spec = json.loads((CLUSTERS / name / "cluster.json").read_text())
    nodes = []
    for item in spec["nodes"]:
        facts = json.loads(replayed(item["fixture"]))
        facts["hostname"] = item["hostname"]
        if facts["sections"].get("host", {}).get("data"):
            facts["sections"]["host"]["data"]["hostname"] = item["hostname"]
        shift_addresses(facts, item.get("address_offset", 0))
        for path, value in (item.get("set") or {}).items():
            set_path(facts, path, copy.deepcopy(value))
        for section, error in (item.get("break") or {}).items():
            facts["sections"][section].update(status="error", data=None, errors=[error])
        nodes.append(facts)
    return cluster_document(nodes, spec.get("failed", []), source="scenario")


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The golden "reasons" of a recommendation: what is set by which rule and why, and what
    was found, conflicted, tied, withheld or skipped."""
    return {
        "env": doc["env"],
        "reasons": {var: [f"{r['rule']}: {r['message']}" for r in reasons]
                    for var, reasons in doc["reasons"].items()},
        "findings": [f"{f['severity']} {f['rule']} [{', '.join(f['hosts'])}]: {f['message']}"
                     for f in doc["findings"] if not f["env"]],
        "conflicts": {c["var"]: c["values"] for c in doc["conflicts"]},
        "ties": {t["var"]: {"candidates": t["candidates"], "chosen": t["chosen"],
                            "decided_by": t["decided_by"]} for t in doc["ties"]},
        "withheld": {w["var"]: w["value"] for w in doc["withheld"]},
        "skipped": sorted({f"{s['rule']} [{', '.join(s['hosts'])}]" for s in doc["skipped"]}),
        "errors": doc["errors"],
    }
