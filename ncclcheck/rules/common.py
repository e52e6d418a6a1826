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
from functools import lru_cache, wraps
from typing import Any, TypeVar

from ncclcheck.rules.base import Finding, fact, hostname

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
