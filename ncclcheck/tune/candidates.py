"""The candidate set of ``ncclcheck tune`` (pure): what is worth measuring on this fabric.

From the recommendation document (:func:`ncclcheck.recommend.document.recommend`) and the nodes'
facts:

* ``baseline``: NCCL's defaults (no variable set), the reference every decision is made against;
* ``recommended``: the rules' env, as ``recommend`` writes it;
* every tie the rules found (``ties[].candidates``, e.g. IB HCA sets or interfaces the facts
  cannot separate): the recommended env with that value;
* every interface set every node shares (one per shared subnet that
  :func:`ncclcheck.rules.net_socket_ifname.select` keeps: never docker*, a bridge, lo, an
  interface on a subnet of its own, or an address several nodes share) as an exact
  ``NCCL_SOCKET_IFNAME==name`` list;
* on IB/RoCE, the HCA sets and GID indexes in question (:mod:`ncclcheck.tune.fabric`);
* on the Socket transport with NCCL, a second stage: NCCL_SOCKET_NTHREADS x
  NCCL_NSOCKS_PERTHREAD within NCCL's limits (threads <= 16, product <= 64,
  src/transport/net_socket.cc MAX_THREADS/MAX_SOCKETS), over the first stage's winner.

A variable the backend does not read is listed with why and never measured: gloo reads only
NCCL_SOCKET_IFNAME (bench turns it into GLOO_SOCKET_IFNAME); NCCL_SOCKET_NTHREADS and the
rest are read by libnccl alone (:data:`ncclcheck.bench.document.GLOO_FOLLOWS`).

A candidate is ``{"id", "label", "stage", "env", "sources", "measure", "not_measured"}``;
``env`` is the whole configuration the run gets. Identical envs are merged (their sources kept).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.document import GLOO_FOLLOWS
from ncclcheck.rules.net_socket_ifname import VAR as IFNAME, _names_for, _one_value, select
from ncclcheck.rules.net_socket_threads import MAX_SOCKETS, MAX_THREADS
from ncclcheck.rules.net_transport import ib_ready, net_plugin

#: (NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD) tried on Socket: NCCL's docs suggest 4 x 4 for
#: 100G; 2 x 4 below; 8 x 8 is the most NCCL takes (product MAX_SOCKETS = 64).
SOCKET_GRID = ((2, 4), (4, 4), (8, 8))
BASELINE, RECOMMENDED = "baseline", "recommended"


def backend_for(nodes: list[dict[str, Any]], asked: str = "auto") -> str:
    """The backend bench will use: ``asked``, else NCCL when every node has a GPU, else gloo.

    >>> backend_for([{"sections": {"gpu": {"status": "ok", "data": {"count": 0}}}}])
    'gloo'
    """
    from ncclcheck.rules.base import fact

    if asked in ("nccl", "gloo"):
        return asked
    return "nccl" if nodes and all(fact(n, "gpu.count", 0) for n in nodes) else "gloo"


def transport_for(nodes: list[dict[str, Any]]) -> str:
    """``IB`` when NCCL's IB transport works on every node, ``plugin`` when a net plugin is
    used, else ``Socket``."""
    if nodes and all(net_plugin(n) for n in nodes):
        return "plugin"
    if nodes and all(ib_ready(n)[0] for n in nodes):
        return "IB"
    return "Socket"


def shared_interfaces(nodes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(subnet, exact NCCL_SOCKET_IFNAME value) for each subnet every node shares on a usable
    interface (the rule's selection; its exclusions apply)."""
    sel = select(nodes)
    out = []
    all_names = {h: set(sel.usable[h]) | set(sel.rejected[h]) for h in sel.hosts}
    for subnet in sorted(sel.speeds):
        value = _one_value(_names_for(sel, [subnet]), all_names)
        if value:
            out.append((subnet, value))
    return out


def ignored_by(backend: str, env: dict[str, str]) -> list[str]:
    """Variables of ``env`` that ``backend`` never reads.

    >>> ignored_by("gloo", {"NCCL_SOCKET_IFNAME": "=a", "NCCL_SOCKET_NTHREADS": "4"})
    ['NCCL_SOCKET_NTHREADS']
    >>> ignored_by("nccl", {"NCCL_SOCKET_NTHREADS": "4"})
    []
    """
    if backend != "gloo":
        return []
    return sorted(k for k in env if k.startswith(("NCCL_", "TORCH_NCCL_")) and k not in GLOO_FOLLOWS)


class CandidateSet:
    """Candidates in order, with identical envs merged."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, cid: str, label: str, env: dict[str, str], source: str, stage: int = 1,
            not_measured: str | None = None) -> dict[str, Any]:
        """Add a candidate, or the source to an existing one with the same env and stage."""
        for item in self.items:
            if item["env"] == env and item["stage"] == stage:
                item["sources"].append(source)
                return item
        item = {"id": cid, "label": label, "stage": stage, "env": dict(env),
                "sources": [source], "measure": not_measured is None,
                "not_measured": not_measured}
        self.items.append(item)
        return item


def first_stage(rec: dict[str, Any], nodes: list[dict[str, Any]], backend: str,
                transport: str = "Socket") -> list[dict[str, Any]]:
    """Stage 1: baseline, recommended, the ties, the shared interfaces, and on IB the HCA sets
    and GID indexes in question (:mod:`ncclcheck.tune.fabric`)."""
    from ncclcheck.tune.fabric import ib_candidates

    env = dict(rec.get("env") or {})
    cands = CandidateSet()
    cands.add(BASELINE, "NCCL's defaults (nothing set)", {}, "baseline: NCCL's defaults")
    cands.add(RECOMMENDED, "the rules' env", env, "recommend (the rules)")
    for tie in rec.get("ties") or []:
        for value in tie.get("candidates") or []:
            cands.add(f"{tie['var']}={value}", f"{tie['var']}={value}",
                      {**env, tie["var"]: value}, f"tie found by {tie.get('rule')}")
    for subnet, value in shared_interfaces(nodes):
        cands.add(f"{IFNAME}={value}", f"{IFNAME}={value}", {**env, IFNAME: value},
                  f"interface shared by every node on {subnet}")
    if transport == "IB":
        for cid, label, cenv, source in ib_candidates(env, nodes):
            cands.add(cid, label, cenv, source)
    for item in cands.items:
        ignored = ignored_by(backend, {k: v for k, v in item["env"].items()
                                       if k not in env or env[k] != v})
        if ignored and item["id"] != RECOMMENDED:
            item["measure"] = False
            item["not_measured"] = f"{backend} ignores {', '.join(ignored)}"
    return cands.items


def holder(cands: list[dict[str, Any]], env: dict[str, str]) -> str:
    """The id of the candidate that holds ``env`` (the rules' env may be NCCL's defaults, or
    one link's list, and was merged into that candidate).

    >>> holder([{"id": "baseline", "env": {}}, {"id": "x", "env": {"A": "1"}}], {})
    'baseline'
    """
    return next(c["id"] for c in cands if c["env"] == env)


def socket_stage(winner_env: dict[str, str], backend: str, transport: str) -> list[dict[str, Any]]:
    """Stage 2 on Socket: the thread/socket grid over ``winner_env`` (listed, not measured,
    where the backend or transport does not read these variables).

    >>> [c["not_measured"] for c in socket_stage({}, "gloo", "Socket")][:1]
    ['gloo ignores NCCL_NSOCKS_PERTHREAD, NCCL_SOCKET_NTHREADS (libnccl reads them; gloo never loads it)']
    >>> socket_stage({}, "nccl", "IB")
    []
    """
    if transport != "Socket":
        return []
    cands = CandidateSet()
    for threads, socks in SOCKET_GRID:
        assert threads <= MAX_THREADS and threads * socks <= MAX_SOCKETS
        env = {**winner_env, "NCCL_SOCKET_NTHREADS": str(threads),
               "NCCL_NSOCKS_PERTHREAD": str(socks)}
        ignored = ignored_by(backend, {"NCCL_SOCKET_NTHREADS": "", "NCCL_NSOCKS_PERTHREAD": ""})
        note = (f"{backend} ignores {', '.join(ignored)} (libnccl reads them; gloo never loads it)"
                if ignored else None)
        cands.add(f"threads={threads}x{socks}", f"{threads} threads x {socks} sockets", env,
                  "Socket transport: helper threads x sockets per thread "
                  f"(<= {MAX_THREADS} threads, product <= {MAX_SOCKETS})", stage=2,
                  not_measured=note)
    return cands.items


def gloo_interfaces(cands: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> dict[str, str]:
    """``{candidate id: interface}`` for the candidates whose ``NCCL_SOCKET_IFNAME`` bench turns
    into the same ``GLOO_SOCKET_IFNAME`` on every node, as bench's rank does it
    (:func:`ncclcheck.bench.ifname.gloo_ifname`: the first interface the value selects that has
    an IPv4 address, in kernel order; the facts list interfaces by ifindex). A candidate
    without the variable (gloo routes to the rendezvous address) or that resolves differently
    on some node is left out: only its runs can say.

    >>> nic = lambda name, addr: {"name": name, "ipv4": [{"address": addr}] if addr else []}
    >>> node = lambda *nics: {"sections": {"network": {"status": "ok", "data": {"interfaces": list(nics)}}}}
    >>> nodes = [node(nic("lo", "127.0.0.1"), nic("eno1", "198.18.0.11"), nic("ens1f0", "198.18.1.11")),
    ...          node(nic("lo", "127.0.0.1"), nic("eno1", "198.18.0.12"), nic("ens1f0", "198.18.1.12"))]
    >>> gloo_interfaces([{"id": "b", "env": {}}, {"id": "l", "env": {IFNAME: "=eno1,ens1f0"}},
    ...                  {"id": "e", "env": {IFNAME: "=ens1f0"}}, {"id": "m", "env": {IFNAME: "=mgmt9"}}],
    ...                 nodes)
    {'l': 'eno1', 'e': 'ens1f0'}
    """
    from ncclcheck.bench.ifname import gloo_ifname
    from ncclcheck.rules.base import fact

    per_node = [[(str(i.get("name")), next((a.get("address") for a in i.get("ipv4") or []), None))
                 for i in fact(n, "network.interfaces", None) or []] for n in nodes]
    out: dict[str, str] = {}
    for cand in cands:
        spec = cand["env"].get(IFNAME) or ""
        if len(spec) <= 1 or not per_node or not all(per_node):
            continue
        chosen = {gloo_ifname(spec, interfaces) for interfaces in per_node}
        if len(chosen) == 1 and None not in chosen:
            out[cand["id"]] = chosen.pop()
    return out
