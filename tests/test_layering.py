"""Heavy imports stay at the edge: nothing on the probe/recommend/diagnose path imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [["probe", "--json"], ["--help"], ["probe", "--help"]])
def test_cli_paths_do_not_import_torch(args):
    code = ("import sys, runpy\n"
            "sys.argv = ['ncclcheck', *%r]\n"
            "try:\n"
            "    runpy.run_module('ncclcheck', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
            "sys.stderr.write('LOADED:' + ','.join(bad))\n" % (args,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.rsplit("LOADED:", 1)[-1] == "", out.stderr[-500:]


def test_help_does_not_import_rich_or_probes():
    code = ("import sys\nfrom ncclcheck.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('MODS:' + ','.join(m for m in ('rich', 'ncclcheck.probes', 'psutil', 'pynvml', 'jinja2')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.rsplit("MODS:", 1)[-1].strip() == ""


# --- the house: floors, no circle, no upward import, no file over 400 lines (issue 15) -----------
# ARCHITECTURE.md draws the same picture; keep the two together.

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ncclcheck"
MAX_LINES = 400

#: Bottom first. A unit is a top-level module or a package of ncclcheck/ (``""`` is
#: ncclcheck/__init__.py). A module may import its own unit and units on floors below its own:
#: never a unit on its own floor, never one above.
FLOORS: list[tuple[str, set[str]]] = [
    ("words", {"", "exitcodes", "textsafe", "envformat", "rootpaths", "charts", "heatmap",
               "platforms"}),
    ("errors", {"errors"}),
    ("files and libraries", {"infile", "outfile", "validate", "native"}),
    ("documents and the rooted reader", {"schema", "hostfile", "host"}),
    ("launchers", {"k8s", "remote"}),
    ("knowledge", {"probes", "rules", "signatures", "pairwise", "expected"}),
    ("reading", {"logparse", "probe"}),
    ("measuring and judging", {"bench", "judge", "jobdir", "cluster", "record"}),
    ("deciding", {"diagnose", "rank", "recommend"}),
    ("tuning", {"tune"}),
    ("drawing", {"render"}),
    ("showing", {"benchcmd", "report"}),
    ("command line", {"cli"}),
    ("entry point", {"__main__"}),
]
FLOOR = {unit: i for i, (_, units) in enumerate(FLOORS) for unit in units}


def modules() -> dict[str, Path]:
    """``ncclcheck.x.y`` -> its file, for every module under ncclcheck/."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The ncclcheck modules ``name`` imports, at module level or inside a function (both are
    arrows: a lazy import still makes one module know another)."""
    found: set[str] = set()
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "ncclcheck"
    pkg.mkdir()
    (pkg / "a.py").write_text("def f():\n    from ncclcheck import b\n")
    (pkg / "b.py").write_text("from . import a\n")
    known = {"ncclcheck.a": pkg / "a.py", "ncclcheck.b": pkg / "b.py"}
    assert imports("ncclcheck.a", pkg / "a.py", known) == {"ncclcheck.b"}
    assert imports("ncclcheck.b", pkg / "b.py", known) == {"ncclcheck.a"}


def test_every_unit_has_a_floor():
    missing = sorted({unit(m) for m in modules()} - set(FLOOR))
    assert not missing, f"give these a floor in FLOORS (and ARCHITECTURE.md): {missing}"


def test_no_import_circle():
    found = cycles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(g) for g in found)


def test_imports_go_down_the_floors_only():
    upward = []
    for name, targets in sorted(graph().items()):
        for target in sorted(targets):
            a, b = unit(name), unit(target)
            if a != b and FLOOR[b] >= FLOOR[a]:
                upward.append(f"{name} -> {target} ({FLOORS[FLOOR[a]][0]} -> {FLOORS[FLOOR[b]][0]})")
    assert not upward, "imports that run up (or across) the floors:\n" + "\n".join(upward)


def test_no_two_floors_could_be_one():
    """The table is as short as the imports allow: every floor holds a unit that imports one on
    the floor right below it, so no two neighbouring floors could be merged (the longest chain
    of imports, __main__ -> cli -> ... -> errors -> exitcodes, has a unit on every floor)."""
    edges = {(unit(a), unit(b)) for a, targets in graph().items() for b in targets}
    for i in range(1, len(FLOORS)):
        upper, lower = FLOORS[i][1], FLOORS[i - 1][1]
        assert any((a, b) in edges for a in upper for b in lower), \
            f"floors {FLOORS[i - 1][0]!r} and {FLOORS[i][0]!r} could be one"


def test_no_file_under_ncclcheck_over_400_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            lines = len(path.read_bytes().splitlines())
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {lines}")
    assert not long, f"over {MAX_LINES} lines:\n" + "\n".join(long)


def test_architecture_page_draws_the_same_floors():
    """ARCHITECTURE.md's table: the same floors, in the same order, holding the same units."""
    rows = []
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and not cells[0].startswith(("floor", "---")):
            units = {u.strip().removesuffix(" (version)").strip("` /") for u in cells[1].split(",")}
            rows.append((cells[0], {"" if u == "__init__" else u for u in units}))
    assert rows == FLOORS
