"""Simulated fleets for the pairwise hunt: noise, slow nodes, slow links; recall and false alarms.

A pair's bandwidth is ``base * min(node_a, node_b) * link * U(1 - noise, 1 + noise)``: a pair
runs at its slower end, times its link's factor. :func:`hunt` runs the same pipeline as
``bench --pairwise``: the schedule, the analysis, and (with ``--rounds``) confirmation rounds of
the suspects against known-good peers, then the analysis again.

>>> fleet = make_fleet(64, seed=1)
>>> result = hunt(fleet)
>>> score(fleet, result)["node_recall"]
1.0
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any, Callable, Iterable

from ncclcheck.pairwise import analysis, schedule


@dataclasses.dataclass
class Fleet:
    """A simulated fleet: its truth and its noise."""

    n: int
    slow_nodes: dict[int, float]
    slow_links: dict[tuple[int, int], float]
    noise: float = 0.1
    base: float = 10.0
    seed: int = 0

    def measurer(self) -> Callable[[int, int], float]:
        """A function ``(a, b) -> GB/s`` with this fleet's noise (its own random stream)."""
        rng = random.Random(self.seed * 7919 + 1)
        nodes, links, lo, width = self.slow_nodes, self.slow_links, 1 - self.noise, 2 * self.noise
        base = self.base

        def measure(a: int, b: int) -> float:
            f = min(nodes.get(a, 1.0), nodes.get(b, 1.0))
            if links:
                f *= links.get((a, b) if a < b else (b, a), 1.0)
            return base * f * (lo + width * rng.random())
        return measure


def make_fleet(n: int, seed: int = 0, noise: float = 0.1, slow_node_frac: float = 0.01,
               slow_node_factor: float = 0.5, slow_link_frac: float = 0.001,
               slow_link_factor: float = 0.3) -> Fleet:
    """A fleet of ``n`` nodes: ``slow_node_frac`` of the nodes (at least one) at
    ``slow_node_factor``, ``slow_link_frac`` of the pairs (at least one) at
    ``slow_link_factor``, and uniform ``+-noise`` on every measurement."""
    rng = random.Random(seed)
    k_nodes = max(1, round(slow_node_frac * n))
    slow_nodes = {i: slow_node_factor for i in rng.sample(range(n), k_nodes)}
    k_links = max(1, round(slow_link_frac * n * (n - 1) / 2))
    links: dict[tuple[int, int], float] = {}
    while len(links) < k_links:
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            links[(min(a, b), max(a, b))] = slow_link_factor
    return Fleet(n, slow_nodes, links, noise, seed=seed)


def run_rounds(matrix: list, rounds: list[schedule.Round],
               measure: Callable[[int, int], float]) -> None:
    """Measure every pair of ``rounds`` into ``matrix``."""
    for rnd in rounds:
        for a, b in rnd:
            analysis.record(matrix, a, b, measure(a, b))


def hunt(fleet: Fleet, rounds: int | None = None, timings: dict[str, float] | None = None,
         measure: Callable[[int, int], float] | None = None) -> dict[str, Any]:
    """The ``bench --pairwise`` pipeline on a simulated fleet; the analysis' verdict.

    ``timings`` (if given) receives the seconds spent in the schedule and the analysis (not in
    the simulated measuring)."""
    n = fleet.n
    measure = measure or fleet.measurer()
    hosts = [f"node{i}" for i in range(n)]
    t = time.perf_counter()
    plan = schedule.plan(n, rounds)
    matrix = analysis.empty_matrix(n)
    spent = time.perf_counter() - t
    run_rounds(matrix, plan, measure)
    t = time.perf_counter()
    verdict = analysis.analyse(hosts, matrix)
    spent += time.perf_counter() - t
    confirm = 0
    if rounds is not None and rounds < schedule.round_count(n):
        t = time.perf_counter()
        extra = confirmation(hosts, matrix, verdict, plan)
        spent += time.perf_counter() - t
        if extra:
            run_rounds(matrix, extra, measure)
            t = time.perf_counter()
            verdict = analysis.analyse(hosts, matrix)
            spent += time.perf_counter() - t
        confirm = len(extra)
    verdict["confirm_rounds"] = confirm
    verdict["matrix"] = matrix
    if timings is not None:
        timings["schedule_and_analysis_s"] = spent
    return verdict


def confirmation(hosts: list[str], matrix: list, verdict: dict[str, Any],
                 plan: list[schedule.Round]) -> list[schedule.Round]:
    """The confirmation rounds for a verdict: suspects against known-good peers, suspect links
    again."""
    index = {h: i for i, h in enumerate(hosts)}
    suspects = [index[v["host"]] for v in verdict["slow_nodes"]]
    links = [(index[v["hosts"][0]], index[v["hosts"][1]]) for v in verdict["slow_links"]]
    good = [i for i, node in enumerate(verdict["nodes"]) if node["status"] == "ok"]
    met = {pair for rnd in plan for pair in rnd}
    return schedule.confirm_rounds(suspects, links, good, met)


def score(fleet: Fleet, verdict: dict[str, Any]) -> dict[str, Any]:
    """Recall and false alarms against the truth. Links are judged among the pairs that were
    measured (a ``--rounds`` schedule measures only some): ``link_recall_measured``; and over
    all slow links: ``link_recall_all``."""
    named_nodes = {int(v["host"][4:]) for v in verdict["slow_nodes"]}
    named_links = {(int(v["hosts"][0][4:]), int(v["hosts"][1][4:])) for v in verdict["slow_links"]}
    matrix = verdict["matrix"]
    truth_nodes, truth_links = set(fleet.slow_nodes), set(fleet.slow_links)
    seen_links = {p for p in truth_links if matrix[p[0]][p[1]] == matrix[p[0]][p[1]]}
    return {
        "nodes": fleet.n, "slow_nodes": len(truth_nodes), "slow_links": len(truth_links),
        "node_recall": len(named_nodes & truth_nodes) / len(truth_nodes),
        "node_false_alarms": len(named_nodes - truth_nodes),
        "node_false_alarm_rate": len(named_nodes - truth_nodes) / fleet.n,
        "links_measured": len(seen_links),
        "link_recall_measured": (len(named_links & seen_links) / len(seen_links)
                                 if seen_links else None),
        "link_recall_all": len(named_links & truth_links) / len(truth_links),
        "link_false_alarms": len(named_links - truth_links),
        "confirm_rounds": verdict.get("confirm_rounds", 0),
    }


def aggregate(scores: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Add up :func:`score` over several fleets, as counts (recalls become what was found).

    >>> a = {"nodes": 64, "slow_nodes": 2, "node_recall": 0.5, "node_false_alarms": 1,
    ...      "links_measured": 0, "link_recall_measured": None, "link_false_alarms": 0,
    ...      "confirm_rounds": 0}
    >>> b = {**a, "node_recall": 1.0, "node_false_alarms": 0, "links_measured": 4,
    ...      "link_recall_measured": 0.75, "link_false_alarms": 2, "confirm_rounds": 3}
    >>> aggregate([a, b])
    {'fleets': 2, 'nodes': 128, 'slow_nodes': 4, 'nodes_found': 3, 'node_false_alarms': 1, \
'links_measured': 4, 'links_found': 3, 'link_false_alarms': 2, 'confirm_rounds': 3}
    """
    total = dict.fromkeys(("fleets", "nodes", "slow_nodes", "nodes_found", "node_false_alarms",
                           "links_measured", "links_found", "link_false_alarms",
                           "confirm_rounds"), 0)
    for s in scores:
        total["fleets"] += 1
        total["nodes"] += s["nodes"]
        total["slow_nodes"] += s["slow_nodes"]
        total["nodes_found"] += round(s["node_recall"] * s["slow_nodes"])
        total["node_false_alarms"] += s["node_false_alarms"]
        total["links_measured"] += s["links_measured"]
        total["links_found"] += round((s["link_recall_measured"] or 0) * s["links_measured"])
        total["link_false_alarms"] += s["link_false_alarms"]
        total["confirm_rounds"] += s["confirm_rounds"]
    return total
