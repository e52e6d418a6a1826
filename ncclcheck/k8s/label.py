"""``ncclcheck k8s label DOC``: node labels (and, asked, taints) from a bench, pairwise or cluster
document, the way Google's cluster-health-scanner marks nodes after its NCCL check.

Labels (prefix ``ncclcheck.io`` unless ``--prefix``):

* pairwise: ``<prefix>/pairwise`` = ``ok``, ``slow``, ``failed`` or ``unjudged`` per node;
* bench: ``<prefix>/bench`` = ``pass`` (or ``fail`` when a result was wrong) and
  ``<prefix>/bench-busbw-gbps`` = the peak bus bandwidth, on every node of the run;
* cluster (``probe --hostfile``) or one node's facts (``probe`` in a pod): ``<prefix>/probe`` =
  ``ok``, ``warning``, ``error`` (the worst finding) or ``failed``.

A node is named as Kubernetes knows it where the document says (a probe in a pod records
``NODE_NAME``), else by its host name (a host-network pod's is the node's). Every key and value
is checked before any request (exit 2). Labels go in one JSON merge patch per node. With
``--taint``, nodes that are not ok also get the taint ``<prefix>/<kind>=<value>:NoSchedule``:
taints are a list, so the node is read, the list changed, and patched with the
``resourceVersion`` read; a 409 (the node changed meanwhile) re-reads, at most
:data:`TAINT_TRIES` times.
"""

from __future__ import annotations

import json
from typing import Any

from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.k8s.labels import check_key, check_value
from ncclcheck.k8s.rest import MERGE_PATCH, Client, Conflict

TAINT_TRIES = 3
SEVERITY = {"error": 2, "warning": 1}


def _gbps(value: Any) -> str:
    return f"{float(value):.1f}" if isinstance(value, (int, float)) else ""


def node_verdicts(doc: Any) -> tuple[str, dict[str, dict[str, str]]]:
    """(kind, {node: {label name: value}}) from a document; :class:`BadInput` for another.

    >>> node_verdicts({"schema": "ncclcheck/pairwise", "nodes": [
    ...     {"host": "n1", "status": "ok"}, {"host": "n2", "status": "slow"}]})
    ('pairwise', {'n1': {'pairwise': 'ok'}, 'n2': {'pairwise': 'slow'}})
    """
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema == "ncclcheck/pairwise":
        return "pairwise", {n["host"]: {"pairwise": n["status"]} for n in doc.get("nodes", [])}
    if schema == "ncclcheck/bench":
        verdict = "pass" if not doc.get("wrong_total") else "fail"
        values = {"bench": verdict, "bench-busbw-gbps": _gbps(doc.get("peak_busbw_gbps"))}
        return "bench", {host: dict(values) for host in doc.get("nodes", [])}
    if schema in ("ncclcheck/cluster", "ncclcheck/facts"):
        out = {}
        for facts in doc.get("nodes", []) if schema == "ncclcheck/cluster" else [doc]:
            worst = max((SEVERITY.get(f.get("severity"), 0) for f in facts.get("findings", [])),
                        default=0)
            launcher = (((facts.get("sections") or {}).get("host") or {}).get("data")
                        or {}).get("launcher") or {}
            name = (launcher.get("pod") or {}).get("node") or facts.get("hostname")
            out[name] = {"probe": ("ok", "warning", "error")[worst]}
        for failed in doc.get("failed", []):
            out[failed["host"]] = {"probe": "failed"}
        return "probe", out
    raise BadInput(f"not a bench, pairwise, cluster or facts document (schema {schema!r})")


def plan(doc: Any, prefix: str = "ncclcheck.io") -> tuple[str, dict[str, dict[str, str]]]:
    """Every node's labels with their full keys, all checked (:class:`BadInput` before any
    request)."""
    from ncclcheck.hostfile import validate_host

    kind, verdicts = node_verdicts(doc)
    if not verdicts:
        raise BadInput("the document names no nodes")
    out = {}
    for node, values in verdicts.items():
        try:
            validate_host(str(node))
        except ValueError as exc:
            raise BadInput(f"node {str(node)[:60]!r}: {exc}") from None
        labels = {}
        for name, value in values.items():
            key = check_key(f"{prefix}/{name}")
            labels[key] = check_value(key, value)
        out[str(node).lower()] = labels
    return kind, out


def label_patch(labels: dict[str, str]) -> dict[str, Any]:
    """The merge patch that sets ``labels``."""
    return {"metadata": {"labels": labels}}


def taint_patch(node: dict[str, Any], taint: dict[str, str] | None,
                key: str) -> dict[str, Any]:
    """The merge patch of ``node``'s taints with ours (``key``) replaced by ``taint`` (removed
    when None), pinned to the resourceVersion read."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != key]
    if taint:
        taints.append(taint)
    return {"metadata": {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")},
            "spec": {"taints": taints}}


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


def apply(client: Client | None, kind: str, nodes: dict[str, dict[str, str]], prefix: str,
          taint: bool, dry_run: bool, say: Any) -> int:
    """Label (and taint) every node; the nodes patched. ``say`` prints one line."""
    key = f"{prefix}/{kind}"
    done = 0
    for name, labels in nodes.items():
        bad = labels.get(key) not in ("ok", "pass")
        ours = {"key": key, "value": labels[key], "effect": "NoSchedule"} if bad else None
        if dry_run:
            say(f"PATCH {node_path(name)} ({MERGE_PATCH})\n"
                f"{json.dumps(label_patch(labels), sort_keys=True)}")
            if taint:
                body = taint_patch({"metadata": {"resourceVersion": "<read>"}}, ours, key)
                say(f"PATCH {node_path(name)} ({MERGE_PATCH}, after GET; other taints kept)\n"
                    f"{json.dumps(body, sort_keys=True)}")
            continue
        assert client is not None
        client.request("PATCH", node_path(name), label_patch(labels), MERGE_PATCH)
        if taint:
            for attempt in range(TAINT_TRIES):
                node = client.request("GET", node_path(name))
                try:
                    client.request("PATCH", node_path(name), taint_patch(node, ours, key),
                                   MERGE_PATCH)
                    break
                except Conflict:
                    if attempt == TAINT_TRIES - 1:
                        raise NcclcheckError(f"node {name}: taints changed {TAINT_TRIES} times "
                                             "while being patched (409); try again") from None
        say(f"{name}: " + ", ".join(f"{k}={v}" for k, v in labels.items())
            + (f"; taint {key}={labels[key]}:NoSchedule" if taint and bad else ""))
        done += 1
    return done
