"""The measuring plan of ``ncclcheck tune`` (pure): round orders, the early-stop rule, the
significance decision and the time budget.

Each candidate is measured once per round (``--repeats`` rounds). The order changes between
rounds so that drift (a link warming up, a neighbour's traffic) does not favour whoever runs
first: round ``r`` starts at the ``r``-th candidate and every odd round runs backwards
(:func:`round_order`), so over the rounds each candidate runs early and late.

A candidate's figure is its peak bus bandwidth (nccl-tests' busbw, GB/s = 1e9 bytes/s) in each
repeat; its spread is the lowest and highest of them.

Early stop (:func:`clearly_worse`, stated in the document as :data:`EARLY_STOP_RULE`): after
:data:`MIN_REPEATS_TO_STOP` rounds, a candidate whose *best* repeat is below the leader's
*worst* repeat by more than :data:`NOISE` is not measured again. The baseline is never stopped:
every decision is against it.

One run for one configuration (:func:`same_run`, :data:`SAME_RUN_RULE`): on gloo, candidates
whose envs differ only in NCCL variables and whose runs all used the same single interface are
one configuration: gloo reads none of the NCCL variables but ``NCCL_SOCKET_IFNAME``, which bench
turns into the one ``GLOO_SOCKET_IFNAME`` the runs report
(:data:`ncclcheck.bench.document.GLOO_FOLLOWS`, :func:`ncclcheck.bench.ifname.gloo_ifname`).
A candidate not yet run joins one when its ``NCCL_SOCKET_IFNAME`` resolves, as bench resolves
it, to that interface on every node (:func:`ncclcheck.tune.candidates.gloo_interfaces`): its
``GLOO_SOCKET_IFNAME`` would be the same, so its run would be the same run. From then on --
within round 1 as soon as the group's runner has run -- one run of that configuration is each
one's repeat (the baseline's run when it is one of them), as nccl-tests measures a
configuration once per repeat whatever it is called; each keeps its own repeats and figures, so
the rules below are applied unchanged.

Significance (:func:`decide`, :data:`SIGNIFICANCE_RULE`): a candidate beats the baseline when
its worst repeat is above the baseline's best repeat (the spreads do not overlap) and its median
is more than :data:`NOISE` above the baseline's. Of those, the highest median wins; a
runner-up that the winner does not beat in the same way is as good, and the simpler of the two
(fewer settings, then fewer interfaces) is kept. When no candidate beats the baseline, there is
"no significant difference" and the rules' recommendation is kept unchanged.
"""

from __future__ import annotations

import statistics
from typing import Any

#: Relative margin a median must clear (the same 5% recommend --bench uses for ties).
NOISE = 0.05
MIN_REPEATS_TO_STOP = 2
EARLY_STOP_RULE = (f"after {MIN_REPEATS_TO_STOP} rounds, a candidate whose best repeat is more "
                   f"than {NOISE:.0%} below the leader's worst repeat is not measured again "
                   "(never the baseline)")
SIGNIFICANCE_RULE = (f"a candidate beats the baseline when its worst repeat is above the "
                     f"baseline's best and its median is more than {NOISE:.0%} above the "
                     "baseline's; the highest median of those wins, and when the runner-up "
                     "is not beaten the same way the simpler env is kept; when none beats the "
                     "baseline: no significant difference, the rules' env is kept")
SAME_RUN_RULE = ("on gloo, candidates whose envs differ only in NCCL variables and whose runs "
                 "all used the same one interface (or, not yet run, whose NCCL_SOCKET_IFNAME "
                 "bench resolves to that interface on every node) are one configuration: from "
                 "then on one run of it is the repeat of each")


def same_run(cands: list[dict[str, Any]], baseline: str,
             resolves: dict[str, str] | None = None) -> dict[str, str]:
    """``{candidate id: id of the candidate whose run is its repeat}`` for the candidates that
    are one configuration on gloo (:data:`SAME_RUN_RULE`); the baseline, else the first of them,
    is the one that runs. ``resolves`` (:func:`ncclcheck.tune.candidates.gloo_interfaces`): the
    interface each candidate's env would run on, for those not yet run; they join a group
    whose runner has run, never run for one.

    >>> run = lambda name: {"error": None, "backend": "gloo", "interfaces": [name]}
    >>> c = lambda i, env, name: {"id": i, "env": env, "runs": [run(name)]}
    >>> same_run([c("baseline", {}, "eth0"), c("list", {"NCCL_SOCKET_IFNAME": "=eth0,eth1"}, "eth0"),
    ...           c("eth0", {"NCCL_SOCKET_IFNAME": "=eth0"}, "eth0"),
    ...           c("eth1", {"NCCL_SOCKET_IFNAME": "=eth1"}, "eth1")], "baseline")
    {'list': 'baseline', 'eth0': 'baseline'}
    >>> nccl = {"id": "x", "env": {}, "runs": [{**run("eth0"), "backend": "nccl"}]}
    >>> same_run([c("baseline", {}, "eth0"), nccl], "baseline")   # NCCL reads every variable
    {}
    >>> same_run([c("baseline", {}, "eth0"), c("t", {"GLOO_SOCKET_IFNAME": "eth0"}, "eth0")],
    ...          "baseline")                                          # not an NCCL variable
    {}
    >>> new = lambda i, env: {"id": i, "env": env, "runs": []}
    >>> same_run([c("baseline", {}, "eth0"), new("list", {"NCCL_SOCKET_IFNAME": "=eth0,eth1"}),
    ...           new("eth1", {"NCCL_SOCKET_IFNAME": "=eth1"})], "baseline",
    ...          {"list": "eth0", "eth1": "eth1"})               # eth1: no run of it yet
    {'list': 'baseline'}
    """
    resolves = resolves or {}
    groups: dict[str, list[dict[str, Any]]] = {}
    waiting: list[tuple[str, dict[str, Any]]] = []
    for cand in cands:
        runs = cand.get("runs") or []
        if not runs and cand["id"] in resolves:
            waiting.append((resolves[cand["id"]], cand))
            continue
        used = {tuple(r.get("interfaces") or ()) for r in runs}
        if (not runs or len(used) != 1 or len(next(iter(used))) != 1
                or any(r.get("error") or r.get("backend") != "gloo" for r in runs)):
            continue
        groups.setdefault(next(iter(used))[0], []).append(cand)
    for name, cand in waiting:
        if name in groups:
            groups[name].append(cand)
    out: dict[str, str] = {}
    for group in groups.values():
        runner = next((c for c in group if c["id"] == baseline and c.get("runs")),
                      next(c for c in group if c.get("runs")))
        for cand in group:
            differ = {k for k in set(cand["env"]) | set(runner["env"])
                      if cand["env"].get(k) != runner["env"].get(k)}
            if cand is not runner and all(k.startswith(("NCCL_", "TORCH_NCCL_")) for k in differ):
                out[cand["id"]] = runner["id"]
    return out


def round_order(ids: list[str], round_index: int) -> list[str]:
    """The order of round ``round_index`` (0-based): the list rotated so that candidate
    ``round_index`` runs first, and every odd round backwards from there; so each candidate
    changes place, and who runs before whom changes too.

    >>> [round_order(["a", "b", "c", "d"], r) for r in range(4)]
    [['a', 'b', 'c', 'd'], ['b', 'a', 'd', 'c'], ['c', 'd', 'a', 'b'], ['d', 'c', 'b', 'a']]
    """
    if not ids:
        return []
    k = round_index % len(ids)
    if round_index % 2 == 0:
        return ids[k:] + ids[:k]
    rotated = ids[k + 1:] + ids[:k + 1]
    return rotated[::-1]


def spread(figures: list[float]) -> dict[str, float] | None:
    """Median, lowest and highest of a candidate's repeats.

    >>> spread([3.0, 1.0, 2.0])
    {'median_gbps': 2.0, 'min_gbps': 1.0, 'max_gbps': 3.0, 'repeats': 3}
    >>> spread([]) is None
    True
    """
    if not figures:
        return None
    return {"median_gbps": statistics.median(figures), "min_gbps": min(figures),
            "max_gbps": max(figures), "repeats": len(figures)}


def beats(a: list[float], b: list[float]) -> bool:
    """Whether repeats ``a`` beat ``b`` beyond the noise (see the module docstring).

    >>> beats([4.0, 4.2, 4.1], [2.0, 2.1, 2.2]), beats([2.3, 2.0], [2.1, 2.2])
    (True, False)
    >>> beats([2.2, 2.21], [2.1, 2.15])   # apart, but within 5%
    False
    """
    if not a or not b:
        return False
    return min(a) > max(b) and statistics.median(a) > statistics.median(b) * (1 + NOISE)


def leader(figures: dict[str, list[float]]) -> str | None:
    """The candidate with the highest median so far."""
    scored = {k: statistics.median(v) for k, v in figures.items() if v}
    return max(scored, key=lambda k: scored[k]) if scored else None


def clearly_worse(figures: dict[str, list[float]], baseline: str) -> dict[str, str]:
    """Candidates to stop measuring, with why (:data:`EARLY_STOP_RULE`).

    >>> clearly_worse({"base": [2.0, 2.1], "fast": [4.0, 4.1], "slow": [1.0, 1.2]}, "base")
    {'slow': "best repeat 1.2 GB/s is below fast's worst 4 GB/s by more than 5%"}
    >>> clearly_worse({"base": [2.0], "slow": [1.0]}, "base")
    {}
    """
    top = leader(figures)
    if top is None or len(figures[top]) < MIN_REPEATS_TO_STOP:
        return {}
    floor = min(figures[top])
    out = {}
    for cid, values in figures.items():
        if cid in (top, baseline) or len(values) < MIN_REPEATS_TO_STOP:
            continue
        if max(values) * (1 + NOISE) < floor:
            out[cid] = (f"best repeat {max(values):.3g} GB/s is below {top}'s worst "
                        f"{floor:.3g} GB/s by more than {NOISE:.0%}")
    return out


def simplicity(candidate: dict[str, Any]) -> tuple[int, int]:
    """Sort key, simpler first: fewer settings, then fewer interfaces in NCCL_SOCKET_IFNAME.

    >>> simplicity({"env": {"NCCL_SOCKET_IFNAME": "=a,b"}}) > simplicity({"env": {"NCCL_SOCKET_IFNAME": "=a"}})
    True
    """
    env = candidate.get("env") or {}
    return len(env), len(str(env.get("NCCL_SOCKET_IFNAME", "")).split(","))


def decide(candidates: list[dict[str, Any]], baseline: str, fallback: str) -> dict[str, Any]:
    """The winner of the measured candidates (``{"id", "figures", "env", ...}``) against
    ``baseline``; ``fallback`` (the rules' recommendation) when nothing beats the baseline.

    >>> c = lambda i, f, env: {"id": i, "figures": f, "env": env}
    >>> cands = [c("base", [2.0, 2.1, 2.0], {}), c("rec", [2.0, 2.1, 2.1], {"X": "=a,b,c"}),
    ...          c("b", [4.0, 4.1, 4.2], {"X": "=b"}), c("a", [2.0, 2.2, 2.1], {"X": "=a"})]
    >>> d = decide(cands, "base", "rec"); d["id"], d["significant"]
    ('b', True)
    >>> decide(cands[:2], "base", "rec")["id"], decide(cands[:2], "base", "rec")["significant"]
    ('rec', False)
    """
    by_id = {c["id"]: c for c in candidates}
    base = by_id.get(baseline, {}).get("figures") or []
    better = [c for c in candidates if c["id"] != baseline and beats(c["figures"], base)]
    if not base:
        return {"id": fallback, "significant": False,
                "why": "the baseline (NCCL's defaults) was not measured: nothing to beat; "
                       "the rules' env is kept"}
    if not better:
        return {"id": fallback, "significant": False,
                "why": "no significant difference: no candidate beat the baseline beyond the "
                       "noise of its repeats; the rules' env is kept"}
    better.sort(key=lambda c: -statistics.median(c["figures"]))
    top = better[0]
    equal = [c for c in better if c is top or not beats(top["figures"], c["figures"])]
    chosen = min(equal, key=simplicity)
    med, bmed = statistics.median(chosen["figures"]), statistics.median(base)
    why = (f"{chosen['id']} measured a median {med:.3g} GB/s busbw "
           f"({min(chosen['figures']):.3g}-{max(chosen['figures']):.3g} over "
           f"{len(chosen['figures'])} repeats) against the baseline's {bmed:.3g} GB/s "
           f"({min(base):.3g}-{max(base):.3g}): x{med / bmed:.2f}" if bmed else
           f"{chosen['id']} measured a median {med:.3g} GB/s busbw; the baseline measured 0")
    if chosen is not top:
        why += (f"; {top['id']} measured more but not beyond the noise, and {chosen['id']} is "
                "the simpler env")
    return {"id": chosen["id"], "significant": True, "why": why}
