"""An interface list that ``tune`` would write, held against what was measured (pure).

NCCL's socket transport makes every interface that ``NCCL_SOCKET_IFNAME`` matches a network
device of its own (``ncclNetSocketInit`` fills ``ncclNetSocketDevs[MAX_IFS]`` from
``ncclFindInterfaces``, src/transport/net_socket.cc at v2.23.4-1), and spreads its channels over
those devices: a slow member of the list paces the job. So a list is not kept because nothing
beat the baseline:

* a member whose own exact candidate (``NCCL_SOCKET_IFNAME==member``, the rest of the env the
  same) measured clearly slower than another member's -- that one's worst repeat above its best
  and its median more than the noise above (:func:`ncclcheck.tune.plan.beats`) -- leaves the
  list (:func:`drop_slow_members`);
* a list whose runs used fewer interfaces than it names (gloo takes one interface in
  ``GLOO_SOCKET_IFNAME``, the first match) was not measured as a list, and the decision says so.

The manual recipe (``recommend --candidates-dir``, ``bench --compare``, ``recommend --bench``)
keeps the fastest tie candidate the same way, so both paths write the same list.
"""

from __future__ import annotations

import statistics
from typing import Any

from ncclcheck.tune import plan

IFNAME = "NCCL_SOCKET_IFNAME"


def members(value: str | None) -> list[str]:
    """The names of an exact or prefix list (an excluding ``^`` list names none kept).

    >>> members("=eth0,eth1"), members("eth"), members("^docker0"), members(None)
    (['eth0', 'eth1'], ['eth'], [], [])
    """
    if not value or value.startswith("^"):
        return []
    return [m.split(":", 1)[0] for m in value.lstrip("=").split(",") if m]


def single(cands: list[dict[str, Any]], env: dict[str, str], name: str) -> dict[str, Any] | None:
    """The measured candidate that is ``env`` with ``name`` alone (exactly)."""
    want = {**env, IFNAME: f"={name}"}
    return next((c for c in cands if c.get("env") == want and c.get("figures")), None)


def used_interfaces(cand: dict[str, Any]) -> list[str]:
    """The interfaces a candidate's runs reported using (all runs together).

    >>> used_interfaces({"runs": [{"interfaces": ["eth0"]}, {"interfaces": ["eth0"]}]})
    ['eth0']
    """
    seen: list[str] = []
    for run in cand.get("runs") or []:
        for name in run.get("interfaces") or []:
            if name not in seen:
                seen.append(name)
    return seen


def drop_slow_members(decision: dict[str, Any], cands: list[dict[str, Any]],
                      env: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The decision and env to write, without the list members measured clearly slower alone.

    ``env`` is what the decision would write. Returns ``(decision, env)``, both unchanged when
    no member goes; else the env without those members (the measured candidate of that list
    when there is one: its id becomes the decision's), and the decision's ``why`` says which
    member left and on what figures (``trimmed``: the members dropped).

    >>> c = lambda i, f, env: {"id": i, "figures": f, "env": env}
    >>> cands = [c("base", [4.0, 4.1], {}), c("list", [4.0, 4.1], {IFNAME: "=a,b"}),
    ...          c("a", [4.1, 4.0], {IFNAME: "=a"}), c("b", [1.0, 1.1], {IFNAME: "=b"})]
    >>> d, env = drop_slow_members({"id": "list", "significant": False, "why": "no win"},
    ...                            cands, {IFNAME: "=a,b"})
    >>> d["id"], env, d["trimmed"]
    ('a', {'NCCL_SOCKET_IFNAME': '=a'}, ['b'])
    """
    names = members(env.get(IFNAME))
    if len(names) < 2 or not env.get(IFNAME, "").startswith("="):
        return decision, env
    alone = {n: single(cands, env, n) for n in names}
    measured = {n: c for n, c in alone.items() if c}
    if len(measured) < 2:
        return decision, env
    best = max(measured, key=lambda n: statistics.median(measured[n]["figures"]))
    top = measured[best]["figures"]
    slow = [n for n, c in measured.items() if n != best and plan.beats(top, c["figures"])]
    if not slow:
        return decision, env
    kept = [n for n in names if n not in slow]
    new_env = {**env, IFNAME: "=" + ",".join(kept)}
    holder = next((c for c in cands if c.get("env") == new_env), None)
    said = "; ".join(
        f"{n} alone measured a median {statistics.median(measured[n]['figures']):.3g} GB/s "
        f"({min(measured[n]['figures']):.3g}-{max(measured[n]['figures']):.3g}), {best} alone "
        f"{statistics.median(top):.3g} GB/s ({min(top):.3g}-{max(top):.3g}): clearly slower"
        for n in slow)
    head = decision["why"].removesuffix("; the rules' env is kept")
    why = (f"{head}; {IFNAME}={env[IFNAME]} loses {', '.join(slow)}: {said}; NCCL "
           "makes every listed interface a device of its own and spreads its channels over "
           "them, so the slower one would pace the job")
    out = {**decision, "why": why, "trimmed": slow}
    if holder is not None:
        out["id"] = holder["id"]
    return out, new_env


def list_note(cand: dict[str, Any] | None, env: dict[str, str]) -> str | None:
    """What to add to the decision when the list to write was measured on fewer interfaces
    than it names (gloo: one), or None.

    >>> list_note({"runs": [{"interfaces": ["eth0"]}]}, {IFNAME: "=eth0,eth1"})
    'NCCL_SOCKET_IFNAME==eth0,eth1 was not measured as a list: its runs used eth0 only (gloo takes one interface; NCCL would use all of them)'
    >>> list_note({"runs": [{"interfaces": ["eth0", "eth1"]}]}, {IFNAME: "=eth0,eth1"}) is None
    True
    >>> list_note(None, {IFNAME: "=eth0,eth2"})
    'NCCL_SOCKET_IFNAME==eth0,eth2 was not measured as a list (its members were, alone)'
    """
    names = members(env.get(IFNAME))
    if len(names) < 2 or not env.get(IFNAME, "").startswith("="):
        return None
    if cand is None:
        return (f"{IFNAME}={env[IFNAME]} was not measured as a list (its members were, "
                "alone)")
    used = used_interfaces(cand)
    if not used or set(names) <= set(used):
        return None
    return (f"{IFNAME}={env[IFNAME]} was not measured as a list: its runs used "
            f"{', '.join(used)} only (gloo takes one interface; NCCL would use all of them)")
