"""Small pure helpers for the view: cell texts, and tables whose odd cells are marked."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from ncclcheck.render import units


MAX_TABLE_ROWS = 64


#: States that are the norm when as many nodes have them as have something else.
HEALTHY = frozenset({"ACTIVE", "LinkUp", "up", "ready"})


def human_bytes(value: Any) -> str:
    """Bytes in binary units, one decimal place (:func:`ncclcheck.render.units.human_bytes`).

    >>> human_bytes(67108864), human_bytes(85520809984), human_bytes(None), human_bytes(512)
    ('64 MiB', '79.6 GiB', '-', '512 B')
    """
    return units.human_bytes(value, 1)


def text(value: Any) -> str:
    """A cell's text (:func:`ncclcheck.render.units.cell_text`): None as '-', bools as yes/no,
    lists joined.

    >>> text(None), text(True), text(["a", 1]), text(2.50), text({})
    ('-', 'yes', 'a, 1', '2.5', '-')
    """
    return units.cell_text(value)


def link(value: Any) -> str:
    """A web address safe to put in ``href``: http(s) only, else ``""`` (shown as text instead).

    >>> link("https://docs.nvidia.com/x"), link("javascript:alert(1)"), link(None)
    ('https://docs.nvidia.com/x', '', '')
    """
    value = str(value or "").strip()
    return value if value.lower().startswith(("https://", "http://")) and " " not in value else ""


def gbps(value: Any) -> str:
    """A GB/s figure with two decimals, as nccl-tests prints it.

    >>> gbps(338.8234), gbps(None), gbps(0)
    ('338.82', '-', '0.00')
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.2f}"
    return "-"


def size_text(size: Any) -> str:
    """nccl-tests' size in binary shorthand.

    >>> size_text(1048576), size_text(8), size_text(None)
    ('1M', '8', '-')
    """
    from ncclcheck.charts import size_label

    return size_label(size) if isinstance(size, (int, float)) and size > 0 else text(size)


def us_text(value: Any) -> str:
    """A time in microseconds as nccl-tests prints it (fewer decimals as it grows).

    >>> us_text(34.123), us_text(822.84), us_text(51205.3), us_text(None)
    ('34.12', '822.8', '51205', '-')
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return f"{value:.0f}" if value >= 10000 else f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def version_key(version: str) -> tuple:
    """Sort key for dotted versions, numbers compared as numbers.

    >>> sorted(["2.21.5", "2.9.9", "2.18.3"], key=version_key)
    ['2.9.9', '2.18.3', '2.21.5']
    """
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in str(version).replace("+", ".").split("."))


def rank_ranges(ranks: list[int]) -> str:
    """Ranks as compact ranges.

    >>> rank_ranges([0, 1, 2, 3, 7, 9, 10]), rank_ranges([])
    ('0-3, 7, 9-10', '-')
    """
    spans: list[list[int]] = []
    for r in sorted(set(ranks)):
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "-"


def fence_for(body: str) -> str:
    """A Markdown code fence longer than any backtick run in ``body``.

    >>> fence_for("a"), fence_for("x ```` y")
    ('```', '`````')
    """
    longest, run = 0, 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def outliers(values: list[str]) -> list[bool]:
    """Which values differ from the rest: those unlike the single most common value. When no
    value is most common, a healthy state (:data:`HEALTHY`) tied with an unhealthy one is taken
    as the norm; otherwise every known value is marked. Unknown values (``-``) never are.

    >>> outliers(["8", "8", "7"]), outliers(["a", "b"]), outliers(["x", "-", "x"]), outliers(["1"])
    ([False, False, True], [True, True], [False, False, False], [False])
    >>> outliers(["ACTIVE", "DOWN"])
    [False, True]
    """
    known = [v for v in values if v != "-"]
    counts = Counter(known).most_common()
    if len(counts) < 2:
        return [False] * len(values)
    top = counts[0][1]
    modes = {v for v, c in counts if c == top}
    if len(modes) > 1 and modes & HEALTHY and modes - HEALTHY:
        modes &= HEALTHY
    return [v != "-" and (len(modes) > 1 or v not in modes) for v in values]


def table(columns: list[tuple[str, str]], rows: list[dict[str, Any]], flag: Iterable[str] = (),
          marks: dict[str, list[bool]] | None = None,
          limit: int = MAX_TABLE_ROWS) -> dict[str, Any]:
    """A view table: ``columns`` are (key, label); cells in ``flag`` columns that differ from
    the column's most common value are marked as outliers, and so are cells that ``marks``
    (column key -> one flag per row, from a comparison across tables) sets.

    Values are compared over every row; when there are more than ``limit`` rows, rows with an
    outlier are kept first (in their order) and the rest fill up to ``limit``.

    >>> t = table([("h", "host"), ("n", "GPUs")], [{"h": "a", "n": 8}, {"h": "b", "n": 8},
    ...           {"h": "c", "n": 7}], flag=["n"], marks={"h": [True, False, False]})
    >>> [[c["text"] for c in r["cells"]] for r in t["rows"]], t["rows"][2]["outlier"], t["outliers"]
    ([['a', '8'], ['b', '8'], ['c', '7']], True, 2)
    >>> big = table([("n", "n")], [{"n": 1}] * 9 + [{"n": 2}], flag=["n"], limit=3)
    >>> [r["cells"][0]["text"] for r in big["rows"]], big["more"]
    (['1', '1', '2'], 7)
    """
    flag, marks = set(flag), marks or {}
    texts = {key: [text(r.get(key)) for r in rows] for key, _ in columns}
    flags = {}
    for key, _ in columns:
        inside = outliers(texts[key]) if key in flag else [False] * len(rows)
        across = list(marks.get(key, []))
        flags[key] = [a or (i < len(across) and bool(across[i])) for i, a in enumerate(inside)]
    odd = [i for i in range(len(rows)) if any(flags[k][i] for k, _ in columns)]
    keep = set(odd[:limit])
    keep.update([i for i in range(len(rows)) if i not in keep][:max(0, limit - len(keep))])
    out_rows = []
    for i in sorted(keep):
        cells = [{"text": texts[key][i], "outlier": flags[key][i],
                  "title": str((rows[i].get("_titles") or {}).get(key, ""))}
                 for key, _ in columns]
        out_rows.append({"cells": cells, "outlier": any(c["outlier"] for c in cells)})
    return {"columns": [{"key": k, "label": label, "differs": any(flags[k])}
                        for k, label in columns],
            "rows": out_rows, "outliers": sum(c["outlier"] for r in out_rows for c in r["cells"]),
            "more": len(rows) - len(out_rows)}


def cross_marks(tables: list[list[dict[str, Any]]], key: str,
                columns: Iterable[str]) -> list[dict[str, list[bool]]]:
    """Compare the same row (by ``key``: a port, a GPU index) across nodes' tables.

    For each node's rows, per column, whether the value differs from what most nodes have in
    that row; the ``key`` cell is marked when at most half the nodes have that row at all.

    >>> a = [{"port": "mlx5_0:1", "state": "ACTIVE"}, {"port": "mlx5_5:1", "state": "ACTIVE"}]
    >>> b = [{"port": "mlx5_0:1", "state": "ACTIVE"}, {"port": "mlx5_5:1", "state": "DOWN"}]
    >>> c = [{"port": "mlx5_0:1", "state": "ACTIVE"}, {"port": "mlx5_5:1", "state": "ACTIVE"}]
    >>> [m["state"] for m in cross_marks([a, b, c], "port", ["state"])]
    [[False, False], [False, True], [False, False]]
    >>> b[1]["rate"], a[1]["rate"] = "10", "400"
    >>> [m["rate"] for m in cross_marks([a, b], "port", ["state", "rate"])]
    [[False, False], [False, True]]
    """
    columns = list(columns)
    out = [{c: [False] * len(rows) for c in [key, *columns]} for rows in tables]
    if len(tables) < 2:
        return out
    where: dict[str, list[tuple[int, int]]] = {}
    for n, rows in enumerate(tables):
        for i, row in enumerate(rows):
            where.setdefault(text(row.get(key)), []).append((n, i))
    for places in where.values():
        if len({n for n, _ in places}) * 2 <= len(tables):
            for n, i in places:
                out[n][key][i] = True
        healthy = [text(tables[n][i].get("state")) in HEALTHY for n, i in places]
        for col in columns:
            values = [text(tables[n][i].get(col)) for n, i in places]
            if any(healthy) and not all(healthy):
                # a port that is down is the odd one out in every column, not its healthy peer
                norm = {v for v, ok in zip(values, healthy) if ok}
                marks = [not ok and v != "-" and v not in norm for v, ok in zip(values, healthy)]
                inside = outliers([v for v, ok in zip(values, healthy) if ok])
                for k in (k for k, ok in enumerate(healthy) if ok):
                    marks[k] = inside.pop(0)
            else:
                marks = outliers(values)
            for (n, i), odd in zip(places, marks):
                out[n][col][i] = odd
    return out
