"""``ncclcheck recommend``: facts (and measurements) in, one environment for every node out.

Flow: load facts (``--probe`` files, or probe this node) -> run every node rule on each node and
every cluster rule on all nodes (:func:`ncclcheck.rules.engine.evaluate`) -> merge the variables
the findings propose -> let bench results decide ties -> refuse values that no env file can hold
safely -> the recommendation document, and the text of the chosen format.

Merging never picks in silence:

* every rule and node that proposes a variable agrees: it is set, with each rule's reason;
* they disagree (two rules, or nodes needing different values): a **conflict**; the variable is
  not set and every proposed value is listed with who proposed it;
* a cluster rule could not read the facts of some nodes: its variables are **withheld** (the
  value was not checked against those nodes);
* a rule found several candidates the facts cannot separate (``evidence["candidates"]``): a
  **tie**. The rule's own choice stays, and the tie names the bench run that decides. Bench
  documents given with ``--bench`` decide it: the candidate with the highest measured bus
  bandwidth wins when it beats the others by more than :data:`NOISE`.

The recommendation document (``"schema": "ncclcheck/recommendation"``)::

    {"hosts": [...], "failed": [{"host", "reason"}], "env": {VAR: value},
     "reasons": {VAR: [{"rule", "severity", "message", "why", "docs", "hosts"}]},
     "findings": [...], "skipped": [...], "errors": [...],
     "conflicts": [{"var", "values": {"rule" | "rule@host,...": value}, "why", "reasons"}],
     "ties": [{"var", "candidates", "chosen", "decided_by", "measurements", "decide_with"}],
     "withheld": [{"var", "value", "rule", "why"}], "refused": [{"var", "value", "why"}],
     "env_overrides": [{"var", "host", "value", "recommended"}],
     "bench_used": [{"file", "label", "op", "peak_busbw_gbps", "env"}], "sources": [...]}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ncclcheck import schema
from ncclcheck.envformat import split_safe
from ncclcheck.recommend_text import (  # noqa: F401  (re-exported: callers import them here)
    _wrap,
    explainable,
    explainable_lines,
    footer_lines,
    group_findings,
    header_lines,
    notes_for,
    problems,
    render_output,
)
from ncclcheck.recommend_ties import (  # noqa: F401  (re-exported)
    NOISE,
    _same,
    candidate_files,
    decide_ties,
    run_value,
    tie_line,
)

RECOMMENDATION = "ncclcheck/recommendation"
BENCH = "ncclcheck/bench"
DOCS_CONF = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


# -- inputs --------------------------------------------------------------------------------------

def load_facts(paths: Iterable[str]) -> dict[str, Any]:
    """A cluster document from ``--probe`` files/folders (see :func:`ncclcheck.cluster.load_sources`)."""
    from ncclcheck.cluster import load_sources

    return load_sources(paths, with_differences=False)  # recommend() works them out


def probe_this_node() -> dict[str, Any]:
    """A one-node cluster document from a live probe of this machine."""
    from ncclcheck.cluster import cluster_document
    from ncclcheck.host.live import LiveHost
    from ncclcheck.probe import collect_facts

    facts = collect_facts(LiveHost("/"), findings=False)
    return cluster_document([facts], [], source="this node", with_differences=False)


def bench_runs(doc: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """Flatten a bench document (one run, an import, or a ``--compare`` set) into runs:
    ``{"file", "label", "op", "peak_busbw_gbps", "avg_busbw_gbps", "env", "interfaces"}``.

    ``env`` is the configuration the run used: NCCL's effective environment overlaid with the
    candidate configuration (``--env``/``--env-file``).

    >>> runs = bench_runs({"schema": "ncclcheck/bench", "runs": [
    ...     {"label": "a.env", "bench": {"op": "all_reduce", "peak_busbw_gbps": 9.5,
    ...      "env": {}, "candidate_env": {"NCCL_SOCKET_IFNAME": "=eth0"}}}]}, "cmp.json")
    >>> runs[0]["label"], runs[0]["env"], runs[0]["peak_busbw_gbps"]
    ('a.env', {'NCCL_SOCKET_IFNAME': '=eth0'}, 9.5)
    """
    items = ([(r.get("label") or f"run {i + 1}", r.get("bench") or {})
              for i, r in enumerate(doc.get("runs") or [])]
             if doc.get("runs") else [(Path(source).name, doc)])
    out = []
    for label, run in items:
        env = {**(run.get("env") or {}), **(run.get("candidate_env") or {})}
        transport = run.get("transport") or {}
        out.append({"file": source, "label": str(label), "op": run.get("op"),
                    "source": run.get("source") or doc.get("source"),
                    "nodes": run.get("nodes"), "world_size": run.get("world_size"),
                    "peak_busbw_gbps": run.get("peak_busbw_gbps"),
                    "avg_busbw_gbps": run.get("avg_busbw_gbps"), "env": env,
                    "network": transport.get("network"),
                    "interfaces": list(transport.get("interfaces") or [])})
    return out


def load_bench(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Every run of every ``--bench`` document."""
    runs: list[dict[str, Any]] = []
    for path in paths:
        doc = schema.load(path, (BENCH,))
        runs.extend(bench_runs(doc, str(path)))
    return runs


# -- merging proposals ---------------------------------------------------------------------------

def _who(finding: dict[str, Any], all_hosts: list[str]) -> str:
    hosts = finding.get("hosts") or []
    if not hosts or sorted(hosts) == sorted(all_hosts):
        return finding["rule"]
    shown = ",".join(hosts[:4]) + (f",+{len(hosts) - 4}" if len(hosts) > 4 else "")
    return f"{finding['rule']}@{shown}"


def _reason(finding: dict[str, Any]) -> dict[str, Any]:
    return {k: finding.get(k) for k in ("rule", "severity", "message", "why", "docs", "hosts")}


def merge(findings: list[dict[str, Any]], skipped: list[dict[str, Any]],
          hosts: list[str]) -> dict[str, Any]:
    """Merge the variables proposed by findings into env, reasons, conflicts, withheld, ties."""
    proposals: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    order: list[str] = []
    for finding in findings:
        for var, value in (finding.get("env") or {}).items():
            if var not in proposals:
                order.append(var)
            proposals[var].append((str(value), finding))
    partial = {s["rule"]: s for s in skipped}
    env: dict[str, str] = {}
    reasons: dict[str, list[dict[str, Any]]] = {}
    conflicts: list[dict[str, Any]] = []
    withheld: list[dict[str, Any]] = []
    for var in order:
        props = proposals[var]
        values = {v for v, _ in props}
        if len(values) > 1:
            by_who = {_who(f, hosts): v for v, f in props}
            rules = {f["rule"] for _, f in props}
            why = ("rules disagree: " + "; ".join(f"{w} says {v}" for w, v in by_who.items())
                   if len(rules) > 1 else
                   "nodes need different values: " + "; ".join(f"{w.split('@', 1)[-1]} needs {v}"
                                                              for w, v in by_who.items())
                   + " (set it per node, e.g. in each node's /etc/nccl.conf)")
            conflicts.append({"var": var, "values": by_who, "why": why,
                              "reasons": [f"{_who(f, hosts)}: {f['message']}" for _, f in props]})
            continue
        value = values.pop()
        held = [f for _, f in props if f["rule"] in partial]
        if held:
            skip = partial[held[0]["rule"]]
            withheld.append({"var": var, "value": value, "rule": held[0]["rule"],
                             "why": f"facts missing on {', '.join(skip['hosts'][:6])} "
                                    f"({skip['reason'][:200]}): not checked there"})
            continue
        env[var] = value
        reasons[var] = [_reason(f) for _, f in props]
    ties = []
    for finding in findings:
        for var, candidates in ((finding.get("evidence") or {}).get("candidates") or {}).items():
            ties.append({"var": var, "rule": finding["rule"], "candidates": list(candidates),
                         "chosen": env.get(var), "decided_by": None, "measurements": []})
    return {"env": env, "reasons": reasons, "conflicts": conflicts, "withheld": withheld,
            "ties": ties}


# -- the document --------------------------------------------------------------------------------

def env_overrides(nodes: list[dict[str, Any]], env: dict[str, str]) -> list[dict[str, str]]:
    """Variables a node's environment already sets to another value: they win over the file."""
    from ncclcheck.rules.base import fact

    out = []
    for node in nodes:
        current = fact(node, "env.nccl") or {}
        if not isinstance(current, dict):
            continue
        for var, value in env.items():
            if var in current and current[var] != value:
                out.append({"var": var, "host": str(node.get("hostname")),
                            "value": current[var], "recommended": value})
    return out


def recommend(cluster: dict[str, Any], runs: list[dict[str, Any]] | None = None,
              sources: list[str] | None = None) -> dict[str, Any]:
    """The recommendation document for a cluster document and optional bench runs."""
    from ncclcheck.cluster import differences, gc_paused
    from ncclcheck.rules import CLUSTER_RULES, NODE_RULES
    from ncclcheck.rules.common import facts_frozen
    from ncclcheck.rules.engine import evaluate

    nodes = list(cluster.get("nodes") or [])
    if not nodes:
        from ncclcheck.errors import BadInput, NcclcheckError

        failed = "; ".join(f"{f.get('host')}: {f.get('reason')}" for f in cluster.get("failed") or [])
        if not failed:  # a document that holds no node at all: bad input (exit 2), not a run
            raise BadInput("no node's facts to recommend from: the input holds no node")
        raise NcclcheckError(f"no node's facts to recommend from (every host failed: "
                             f"{failed[:300]})")
    hosts = [str(n.get("hostname")) for n in nodes]
    # rules over 1,000 nodes allocate a lot and free it all by refcount; and they share the
    # interface selection and per-node port lists, worked out once while the facts hold still
    with gc_paused(), facts_frozen():
        diffs = differences(nodes)
        result = evaluate(NODE_RULES + CLUSTER_RULES, nodes)
    merged = merge(result["findings"], result["skipped"], hosts)
    env, reasons = merged["env"], merged["reasons"]
    runs = runs or []
    decide_ties(merged["ties"], runs, env, reasons)
    for tie in merged["ties"]:
        files = list(candidate_files(tie, env))
        # the files exist only once --candidates-dir wrote them (write_candidates says where)
        tie["decide_with"] = (f"recommend --candidates-dir DIR writes {', '.join(files)}; then "
                              f"ncclcheck bench --hostfile HOSTS --compare DIR/{tie['var']}-*.env")
        tie["files"] = files
    safe, refused = split_safe(env)
    for item in refused:
        reasons.pop(item["var"], None)
    order = [v for r in (list(NODE_RULES) + list(CLUSTER_RULES)) for v in r.sets]
    ordered = dict(sorted(safe.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order
                                                        else len(order), kv[0])))
    return schema.envelope(
        RECOMMENDATION, created_at=schema.now_utc(), hosts=hosts,
        failed=list(cluster.get("failed") or []), env=ordered,
        reasons={v: reasons[v] for v in ordered}, findings=result["findings"],
        skipped=result["skipped"], errors=result["errors"], conflicts=merged["conflicts"],
        ties=merged["ties"], withheld=merged["withheld"], refused=refused,
        env_overrides=env_overrides(nodes, ordered),
        bench_used=[{k: r.get(k) for k in ("file", "label", "op", "peak_busbw_gbps", "env")}
                    for r in runs],
        differences=diffs, sources=sources or [])


# -- the command ---------------------------------------------------------------------------------

def write_candidates(doc: dict[str, Any], folder: str) -> list[str]:
    """``--candidates-dir``: write each tie's candidate env files and point decide_with at them."""
    import os

    from ncclcheck.errors import BadInput

    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--candidates-dir {folder}: cannot create ({exc.strerror or exc})") from None
    written = []
    for tie in doc.get("ties") or []:
        paths = []
        for name, text in candidate_files(tie, doc["env"]).items():
            path = os.path.join(folder, name)
            schema.write_atomic(path, text)
            paths.append(path)
        tie["files"] = paths
        tie["decide_with"] = "ncclcheck bench --hostfile HOSTS --compare " + " ".join(paths)
        written += paths
    return written


def verify_document(doc: dict[str, Any], nccl_lib: str | None,
                    local_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--verify``: write the env format to a private temporary file and check it with libnccl."""
    import os
    import tempfile

    from ncclcheck.verify import find_libnccl, verify, where_warnings

    with tempfile.TemporaryDirectory(prefix="ncclcheck-verify-") as tmp:
        path = os.path.join(tmp, "nccl.env")
        Path(path).write_text(render_output(doc, "env"), encoding="utf-8")
        result = verify(path, find_libnccl(local_facts, nccl_lib))
    import socket

    warnings = where_warnings(doc.get("env") or {}, local_facts, socket.gethostname(),
                              [str(h) for h in doc.get("hosts") or []])
    if local_facts is None and not result["ok"]:  # the likely reason it failed: a problem
        result["problems"].append(warnings.pop(0))
    result["warnings"] = warnings  # said also when it passed: what the pass does not prove
    return result


def check_dump_dir(path: str | None) -> None:
    """``--dump-dir``: an absolute path an env file can hold as is (no space, quote, ``$``,
    ``%``: NCCL_DEBUG_FILE expands ``%h``/``%p``).

    Raises:
        BadInput: anything else.
    """
    import re

    from ncclcheck.errors import BadInput

    if path is not None and not re.fullmatch(r"/[A-Za-z0-9_.,:/=^+@-]*", path):
        raise BadInput(f"--dump-dir {path!r}: give an absolute path of letters, digits and "
                       "_.,:/=^+@- only (it is written into the env file as is)")


def run_command(probe_paths: list[str], bench_paths: list[str], fmt: str, verify: bool = False,
                nccl_lib: str | None = None, candidates_dir: str | None = None,
                output: str | None = None, dump_dir: str | None = None
                ) -> tuple[dict[str, Any], str, list[dict[str, str]]]:
    """Everything ``ncclcheck recommend`` does but printing: (document, output text, problems)."""
    import socket

    from ncclcheck.cluster import gc_paused
    from ncclcheck.rules.cluster_nccl_version_mismatch import oldest

    check_dump_dir(dump_dir)
    with gc_paused():  # thousands of facts documents: see gc_paused
        cluster = load_facts(probe_paths) if probe_paths else probe_this_node()
        runs = load_bench(bench_paths)
        doc = recommend(cluster, runs, sources=list(probe_paths) or ["this node (live probe)"])
        nodes = cluster.get("nodes") or []
        here = socket.gethostname()
        local = next((n for n in nodes if n.get("hostname") == here),
                     nodes[0] if not probe_paths and nodes else None)
        nccl = oldest(nodes)
        del cluster, nodes  # freed here, by reference counting, before the collector is back
    if candidates_dir:
        write_candidates(doc, candidates_dir)
    if verify:
        doc["verify"] = verify_document(doc, nccl_lib, local)
    # issue 22: a section the user can drop; the document holds it, the env text is written from it
    doc["explainable_hang"] = explainable(doc.get("env") or {}, nccl, dump_dir)
    text = render_output(doc, fmt)
    if fmt in ("env", "shell"):
        text += "\n" + "\n".join(explainable_lines(fmt, doc["explainable_hang"])) + "\n"
    return doc, text, problems(doc)
