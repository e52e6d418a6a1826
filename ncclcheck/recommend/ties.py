"""Ties in a recommendation: the candidates the facts cannot separate, decided by measured bus
bandwidth when bench documents were given (:func:`decide_ties`), and the env file per candidate
that measures them (:func:`candidate_files`). Used by :mod:`ncclcheck.recommend`.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.envformat import render

#: A measured candidate must beat the others by this fraction to decide a tie.
NOISE = 0.05


def run_value(run: dict[str, Any], var: str) -> str | None:
    """The value ``var`` had in a bench run: its configuration, else (for the interface list)
    the interfaces NCCL reported using.

    >>> run_value({"env": {}, "interfaces": ["eth1", "eth0"]}, "NCCL_SOCKET_IFNAME")
    '=eth0,eth1'
    """
    if run["env"].get(var):
        return run["env"][var]
    if var == "NCCL_SOCKET_IFNAME" and run.get("interfaces"):
        return "=" + ",".join(sorted(run["interfaces"]))
    return None


def _same(a: str, b: str) -> bool:
    """Two values that mean the same interface or HCA list (order of an '=' list ignored)."""
    if a.startswith("=") and b.startswith("="):
        return sorted(a[1:].split(",")) == sorted(b[1:].split(","))
    return a == b


def decide_ties(ties: list[dict[str, Any]], runs: list[dict[str, Any]],
                env: dict[str, str], reasons: dict[str, list[dict[str, Any]]]) -> None:
    """Let measured bus bandwidth decide each tie; record what was measured either way."""
    for tie in ties:
        options = list(dict.fromkeys([*tie["candidates"], *([tie["chosen"]] if tie["chosen"] else [])]))
        best: dict[str, tuple[float, dict[str, Any]]] = {}
        for run in runs:
            value = run_value(run, tie["var"])
            score = run.get("peak_busbw_gbps") or run.get("avg_busbw_gbps")
            if value is None or not isinstance(score, (int, float)):
                continue
            match = next((o for o in options if _same(o, value)), None)
            if match is None:
                continue
            tie["measurements"].append({"value": match, "label": run["label"], "file": run["file"],
                                        "op": run.get("op"), "peak_busbw_gbps": score})
            if match not in best or score > best[match][0]:
                best[match] = (score, run)
        if len(best) < 2:
            tie["verdict"] = ("not measured" if not best else
                              f"only {next(iter(best))} was measured; measure the others too")
            continue
        ranked = sorted(best.items(), key=lambda kv: -kv[1][0])
        (win, (top, run)), (_, (second, _)) = ranked[0], ranked[1]
        if top < second * (1 + NOISE):
            tie["verdict"] = (f"measured within {NOISE:.0%} of each other ({top:.3g} vs "
                              f"{second:.3g} GB/s busbw): the measurement does not separate them")
            continue
        tie["decided_by"] = "bench"
        tie["verdict"] = f"{win} measured {top:.3g} GB/s busbw, the next best {second:.3g} GB/s"
        tie["chosen"] = win
        env[tie["var"]] = win
        facts_said = [{**r, "message": f"the facts alone: {r['message']}"}
                      for r in reasons.get(tie["var"], [])]
        reasons[tie["var"]] = [{
            "rule": "bench", "severity": "info",
            "message": (f"measured fastest: {win} at {top:.3g} GB/s peak busbw ({run['label']} "
                        f"in {run['file']}), next best {second:.3g} GB/s"),
            "why": ("the facts left these candidates equal; bench measured them like nccl-tests "
                    "(busbw, GB/s = 1e9 bytes/s) and the fastest is kept"),
            "docs": "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md",
            "hosts": []}] + facts_said


def tie_line(tie: dict[str, Any]) -> str:
    """One line saying what the facts cannot decide.

    >>> tie_line({"var": "NCCL_SOCKET_IFNAME", "candidates": ["=a,b", "=a", "=b"]})
    'TIE NCCL_SOCKET_IFNAME: the facts cannot choose between =a,b | =a | =b (not measured)'
    """
    return (f"TIE {tie['var']}: the facts cannot choose between {' | '.join(tie['candidates'])} "
            f"({tie.get('verdict') or 'not measured'})")


def candidate_files(tie: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    """One env file text per candidate of a tie: the full recommendation with that value.

    >>> sorted(candidate_files({"var": "NCCL_SOCKET_IFNAME", "candidates": ["=eth0", "=eth1"]}, {}))
    ['NCCL_SOCKET_IFNAME-1.env', 'NCCL_SOCKET_IFNAME-2.env']
    """
    files = {}
    for i, value in enumerate(tie["candidates"], 1):
        text = render("env", {**env, tie["var"]: value},
                      header=[f"candidate {i} of the {tie['var']} tie: {value}"])
        files[f"{tie['var']}-{i}.env"] = text
    return files
