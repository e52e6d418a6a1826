"""Text for expected bandwidth: ``ncclcheck expected`` (the table with its sources) and the
``# Expected`` lines under bench's table (class, range, ratio, verdict, limits)."""

from __future__ import annotations

from typing import Any


def fmt_gbps(value: float) -> str:
    """A bandwidth with 3-4 significant digits.

    >>> fmt_gbps(480.0), fmt_gbps(0.0255), fmt_gbps(24.5)
    ('480', '0.0255', '24.5')
    """
    return f"{value:.4g}" if value < 100 else f"{value:.0f}"


def range_text(entry: dict[str, Any]) -> str:
    """A class's range as the listing shows it: per node, per NIC with 1/4/8 NICs, or relative.

    >>> range_text({"busbw_gbps": [44, 49], "per": "nic", "nics": [1, 8]})
    '44-49 GB/s per NIC (1 NIC: 44-49, 8 NICs: 352-392)'
    >>> range_text({"busbw_gbps": [0.45, 1.02], "per": "node", "relative": True})
    '0.45-1.02 x the shaped rate'
    """
    low, high = entry["busbw_gbps"]
    if entry.get("relative"):
        return f"{low:g}-{high:g} x the shaped rate"
    if entry.get("per") == "nic":
        per = ", ".join(f"{n} NIC{'s' if n != 1 else ''}: {fmt_gbps(low * n)}-{fmt_gbps(high * n)}"
                        for n in entry.get("nics") or [])
        return f"{low:g}-{high:g} GB/s per NIC ({per})"
    return f"{fmt_gbps(low)}-{fmt_gbps(high)} GB/s"


def render_table(classes: list[dict[str, Any]], sources: bool = True) -> str:
    """``ncclcheck expected``: every class, its range, what it holds for, and its sources."""
    lines = [f"# expected busbw (nccl-tests' busbw, GB/s = 1e9 B/s) by hardware class: "
             f"{len(classes)} classes"]
    for e in classes:
        lines.append(f"{e['id']:<22} {range_text(e)}")
        lines.append(f"{'':<22} {e['title']}")
        lines.append(f"{'':<22} holds for: {', '.join(e['collectives'])}; {e['holds_for']}")
        if sources:
            for s in e.get("sources") or []:
                lines.append(f"{'':<22} source: {s['url']} -- {s['says']}")
    return "\n".join(lines) + "\n"


def bench_lines(expected: dict[str, Any] | None) -> list[str]:
    """The ``# Expected`` lines under bench's table."""
    if not expected:
        return []
    if not expected.get("class"):
        return ["# Expected             : no class: missing " + "; ".join(expected.get("missing") or ["?"])]
    rng = expected.get("range")
    head = f"# Expected             : {expected['class']} ({expected.get('title')})"
    lines = [head]
    if rng:
        lines.append(f"#   range              : {fmt_gbps(rng[0])}-{fmt_gbps(rng[1])} GB/s busbw for "
                     f"{', '.join(expected.get('collectives') or [])}, >= {expected.get('min_bytes')} B")
    value = expected.get("measured_gbps")
    if value is not None and expected.get("verdict"):
        ratio = expected.get("ratio")
        lines.append(f"#   verdict            : {expected['verdict']}: {fmt_gbps(value)} GB/s at "
                     f"{expected.get('size_bytes')} B"
                     + (f" = {ratio:.0%} of the class's top" if ratio is not None else ""))
    for limit in expected.get("limits") or []:
        lines.append(f"#   limited by         : {limit}")
    for note in expected.get("notes") or []:
        lines.append(f"#   note               : {note}")
    for missing in expected.get("missing") or []:
        lines.append(f"#   missing            : {missing}")
    for url in (expected.get("sources") or [])[:3]:
        lines.append(f"#   source             : {url}")
    return lines


def pairwise_lines(expected: dict[str, Any] | None) -> list[str]:
    """The per-link expectation under ``bench --pairwise``'s verdicts."""
    if not expected:
        return []
    if not expected.get("class"):
        return ["expected per link: unknown (" + "; ".join(expected.get("missing") or []) + ")"]
    low, high = expected["range"]
    counts = expected.get("counts") or {}
    lines = [f"expected per link: {expected['class']} at {expected['rate_gbps'] * 8000:g} Mbit/s "
             f"({expected.get('rate_from')}): {fmt_gbps(low)}-{fmt_gbps(high)} GB/s; "
             + ", ".join(f"{v} {k}" for k, v in counts.items())]
    for p in expected.get("pairs") or []:
        a, b = p["hosts"]
        lines.append(f"  {a} <-> {b}  {p['gbps']:.4g} GB/s = {p['ratio']:.0%}: {p['verdict']}"
                     + (f" ({'; '.join(p['limits'])})" if p.get("limits") else ""))
    return lines
