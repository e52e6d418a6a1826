"""Each rank's progress through the collectives of a diagnosed job, culprits marked, as text bars.

>>> doc = {"progress": [{"rank": 0, "pg": "0", "last_entered": 5, "last_completed": None},
...                     {"rank": 1, "pg": "0", "last_entered": 4, "last_completed": None}],
...        "culprits": [{"rank": 1, "kind": "missing", "pg": "0"}],
...        "first_desync": {"pg": "0", "seq": 5, "op": "all_reduce"}}
>>> print("\\n".join(progress_lines(doc, width=10)))
process group 0: up to all_reduce #5 (▒ completed, █ entered; gloo records no completion)
rank 0 ██████████ 5
rank 1 ████████   4  <- missing
"""

from __future__ import annotations

from typing import Any

MAX_ROWS = 64


def progress_lines(doc: dict[str, Any], width: int = 40) -> list[str]:
    """Bars per rank of the first desynchronised group (or the first group), culprits marked;
    beyond :data:`MAX_ROWS` ranks, the culprits and the first ranks."""
    rows = [p for p in doc.get("progress") or [] if isinstance(p, dict)]
    if not rows:
        return []
    desync = doc.get("first_desync") or {}
    pg = desync.get("pg", rows[0].get("pg"))
    rows = [p for p in rows if p.get("pg") == pg]
    kinds = {c.get("rank"): c.get("kind") for c in doc.get("culprits") or []
             if isinstance(c, dict) and c.get("pg", pg) == pg}
    top = max([int(p.get("last_entered") or 0) for p in rows] + [int(desync.get("seq") or 0), 1])
    if len(rows) > MAX_ROWS:
        rows = [p for p in rows if p.get("rank") in kinds] + \
            [p for p in rows if p.get("rank") not in kinds][:MAX_ROWS - len(kinds)]
    label = max(len(str(p.get("rank"))) for p in rows)
    head = f"process group {pg}: up to {desync.get('op', 'the last collective')} #{top}"
    out = [head + " (▒ completed, █ entered; gloo records no completion)"]
    for p in rows:
        entered = int(p.get("last_entered") or 0)
        done = p.get("last_completed")
        full = round(width * entered / top)
        solid = round(width * done / top) if isinstance(done, int) and done >= 0 else 0
        bar = ("▒" * min(solid, full) + "█" * (full - min(solid, full))).ljust(width)
        mark = f"  <- {kinds[p['rank']]}" if p.get("rank") in kinds else ""
        out.append(f"rank {str(p.get('rank')).rjust(label)} {bar} {entered}{mark}")
    for r, kind in sorted(kinds.items(), key=lambda x: str(x[0])):
        if r not in {p.get("rank") for p in rows}:
            out.append(f"rank {r} (no dump) <- {kind}")
    return out
