"""Helpers shared by the cluster rules: a node's configured NCCL values, natural sorting, the
"most nodes have X, these have Y" comparison behind the mismatch rules, and a cache that lets
rules share work while the facts cannot change.

Not a rule: the registry test skips this module.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache, wraps
from typing import Any, TypeVar

from ncclcheck.rules.base import Finding, Severity, fact, hostname

_DIGITS = re.compile(r"(\d+)")
_SCOPES: list[dict[Any, tuple[Any, Any]]] = []  #: one cache per open facts_frozen() block
T = TypeVar("T")


@contextmanager
def facts_frozen() -> Iterator[None]:
    """A block in which the facts documents do not change, so that what several rules ask of
    the same node (its ACTIVE ports, whether IB works) or of the same cluster (the socket
    interface selection) is worked out once. Outside such a block nothing is cached, so a
    caller that edits a document and asks again always gets a fresh answer.

    >>> calls = []
    >>> @per_node
    ... def ports(facts):
    ...     calls.append(1)
    ...     return len(facts)
    >>> doc = {"a": 1}
    >>> with facts_frozen():
    ...     ports(doc), ports(doc)
    (1, 1)
    >>> ports(doc), len(calls)
    (1, 2)
    """
    _SCOPES.append({})
    try:
        yield
    finally:
        _SCOPES.pop()


def per_node(fn: Callable[[dict[str, Any]], T]) -> Callable[[dict[str, Any]], T]:
    """Cache ``fn(facts)`` per facts document inside :func:`facts_frozen` (callers must not
    change what it returns)."""
    @wraps(fn)
    def cached(facts: dict[str, Any]) -> T:
        if not _SCOPES:
            return fn(facts)
        cache, key = _SCOPES[-1], (fn.__qualname__, id(facts))
        hit = cache.get(key)
        if hit is not None and hit[0] is facts:
            return hit[1]
        value = fn(facts)
        cache[key] = (facts, value)
        return value
    return cached


def per_cluster(fn: Callable[[list[dict[str, Any]]], T]) -> Callable[[list[dict[str, Any]]], T]:
    """Cache ``fn(nodes)`` per list of facts documents (the same documents, in the same order)
    inside :func:`facts_frozen`."""
    @wraps(fn)
    def cached(nodes: list[dict[str, Any]]) -> T:
        if not _SCOPES:
            return fn(nodes)
        cache, key = _SCOPES[-1], (fn.__qualname__, tuple(id(n) for n in nodes))
        hit = cache.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], nodes)):
            return hit[1]
        value = fn(nodes)
        cache[key] = (list(nodes), value)
        return value
    return cached


@lru_cache(maxsize=8192)
def natural(text: str) -> tuple:
    """Sort key that puts mlx5_2 before mlx5_10 and eth2 before eth10.

    >>> sorted(["mlx5_10:1", "mlx5_2:1"], key=natural)
    ['mlx5_2:1', 'mlx5_10:1']
    """
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(text))


def configured(facts: dict[str, Any], name: str) -> str | None:
    """The value NCCL would read for ``name`` on this node before our file: the process
    environment first, then the NCCL config files (``nccl.conf_env``, NCCL's order), else None.

    >>> doc = {"sections": {"env": {"status": "ok", "data": {"nccl": {"NCCL_IB_HCA": "mlx5"}}},
    ...        "nccl": {"status": "ok", "data": {"conf_env": {"NCCL_IB_HCA": "=mlx5_0",
    ...                                                       "NCCL_IB_TIMEOUT": "22"}}}}}
    >>> configured(doc, "NCCL_IB_HCA"), configured(doc, "NCCL_IB_TIMEOUT"), configured(doc, "NCCL_X")
    ('mlx5', '22', None)
    """
    for path in ("env.nccl", "nccl.conf_env"):
        values = fact(facts, path)
        if isinstance(values, dict) and values.get(name) not in (None, ""):
            return str(values[name])
    return None


def outliers(values: dict[str, Any]) -> tuple[Any, list[str]]:
    """The most common value and the hosts that differ from it.

    >>> outliers({"a": "1", "b": "1", "c": "2"})
    ('1', ['c'])
    """
    counts = Counter(v for v in values.values())
    common = counts.most_common(1)[0][0] if counts else None
    return common, sorted(h for h, v in values.items() if v != common)


def mismatch(nodes: list[dict[str, Any]], value_of: Callable[[dict[str, Any]], Any], what: str,
             evidence_key: str, consequence: str = "") -> list[Finding]:
    """One finding naming the outlier nodes when ``value_of`` differs between nodes (nodes where
    it is unknown are left out of the comparison), else none.

    >>> docs = [{"hostname": h, "sections": {"gpu": {"status": "ok", "data": {"driver_version": v}}}}
    ...         for h, v in (("a", "535"), ("b", "535"), ("c", "550"))]
    >>> [f.message for f in mismatch(docs, lambda n: fact(n, "gpu.driver_version"), "driver versions",
    ...                              "gpu.driver_version")]
    ['driver versions differ: most nodes have 535, but c=550']
    """
    known = {hostname(n): v for n in nodes if (v := value_of(n))}
    if len(set(known.values())) < 2:
        return []
    common, odd = outliers(known)
    listing = "; ".join(f"{h}={known[h]}" for h in odd[:8])
    more = " and more" if len(odd) > 8 else ""
    return [Finding(
        message=f"{what} differ: most nodes have {common}, but {listing}{more}{consequence}",
        evidence={evidence_key: known}, hosts=tuple(odd))]


#: How many nodes the documents of the running evaluation hold (0 outside one): a cluster
#: document of several nodes says "more than one node" for each of its nodes' rules.
_CLUSTER_SIZE: ContextVar[int] = ContextVar("ncclcheck_cluster_size", default=0)
#: What :func:`peer_scope` reads besides a peer rule's own ``reads`` (absent: "unknown").
PEER_READS = ("host.launcher", "env.other", "network.interfaces")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "::1")


@contextmanager
def cluster_of(size: int) -> Iterator[None]:
    """A block whose rules judge nodes known to be ``size`` together (the engine opens it)."""
    token = _CLUSTER_SIZE.set(max(size, _CLUSTER_SIZE.get()))  # an inner one-node run stays in it
    try:
        yield
    finally:
        _CLUSTER_SIZE.reset(token)


def _own_addresses(facts: dict[str, Any]) -> set[str]:
    return {str(a.get("address")) for i in fact(facts, "network.interfaces", []) or []
            for a in (i.get("ipv4") or []) + (i.get("ipv6") or []) if isinstance(a, dict)}


def peer_scope(facts: dict[str, Any]) -> tuple[str, str]:
    """Whether this node works with others: ``("multi" | "single" | "unknown", why)``.

    Read, in order: the number of nodes evaluated together (a cluster document), the
    launcher's node count (Slurm, DeepSpeed), a world larger than the local one (torchrun,
    MPI), and ``MASTER_ADDR`` (loopback: one node, as PyTorch's DDP tutorial sets it; another
    host's address: several).

    >>> def doc(**env):
    ...     return {"sections": {"env": {"status": "ok", "data": {"other": env}},
    ...                          "host": {"status": "ok", "data": {"launcher": {}}}}}
    >>> peer_scope(doc(MASTER_ADDR="localhost"))[0], peer_scope(doc(MASTER_ADDR="10.0.0.1"))[0]
    ('single', 'multi')
    >>> peer_scope(doc(WORLD_SIZE="16", LOCAL_WORLD_SIZE="8"))[0], peer_scope(doc())[0]
    ('multi', 'unknown')
    >>> (peer_scope(doc(OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_SIZE="2"))[0],
    ...  peer_scope(doc(PMI_SIZE="2", MPI_LOCALNRANKS="2"))[0])
    ('multi', 'single')
    >>> with cluster_of(2):
    ...     peer_scope(doc(MASTER_ADDR="127.0.0.1"))
    ('multi', '2 nodes in the facts')
    """
    size = _CLUSTER_SIZE.get()
    if size > 1:
        return "multi", f"{size} nodes in the facts"
    launcher = fact(facts, "host.launcher", {}) or {}
    env = fact(facts, "env.other", {}) or {}
    nnodes = launcher.get("nnodes")
    if isinstance(nnodes, int) and nnodes > 0:
        return ("multi" if nnodes > 1 else "single"), f"the {launcher.get('kind')} job has " \
                                                      f"{nnodes} node(s)"
    world, local = (str(env.get(k) or launcher.get(k.lower()) or "")
                    for k in ("WORLD_SIZE", "LOCAL_WORLD_SIZE"))
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        world = world or str(env.get(name) or "")
    local = local or str(env.get("OMPI_COMM_WORLD_LOCAL_SIZE") or env.get("MPI_LOCALNRANKS")
                         or env.get("LOCAL_SIZE") or "")
    if world.isdigit() and local.isdigit() and int(local) > 0:
        return (("multi" if int(world) > int(local) else "single"),
                f"world size {world}, {local} on this node")
    master = str(env.get("MASTER_ADDR") or launcher.get("master_addr") or "").strip()
    if master:
        host = master.split("://")[-1].rsplit("@", 1)[-1].strip("[]").lower()
        if host in _LOOPBACK_NAMES or host.startswith("127."):
            return "single", f"MASTER_ADDR={master} (loopback: one node)"
        if host not in _own_addresses(facts) and host != str(facts.get("hostname", "")).lower():
            return "multi", f"MASTER_ADDR={master} is another host"
    return "unknown", "no launcher, node count or MASTER_ADDR says how many nodes"


def gate_peers(findings: list[Finding], facts: dict[str, Any], severity: Severity) -> list[Finding]:
    """A peer rule's findings on one node: kept on several nodes, INFO on one node, and at most
    WARNING when nothing says how many nodes there are (a finding that would fail a one-node
    pre-flight with ``--fail-on error`` must be sure there are peers)."""
    scope, why = peer_scope(facts)
    if scope == "multi" or not findings:
        return findings
    out = []
    for f in findings:
        sev = f.severity or severity
        if scope == "single":
            sev, note = Severity.INFO, f" (one node: {why}; this matters only when other nodes connect)"
        else:
            sev = min(sev, Severity.WARNING, key=lambda s: s.rank)
            note = " (if other nodes connect to this one; the facts do not say how many nodes the job has)"
        out.append(replace(f, message=f.message + note, severity=sev,
                           evidence={**f.evidence, "peers": why}))
    return out
