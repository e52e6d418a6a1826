"""One import path per name (issue 29): no module under ncclcheck/ re-exports what it imports.

A name imported at module level (``from x import name``, ``import x``) that the module never uses
is either a re-export (a second path to a name that lives elsewhere) or a dead import: both fail.
A use is a load of the name anywhere in the module (functions and classes included), in a string
annotation, or in a doctest of one of its docstrings (doctests run with the module's globals).
A mention in ``__all__`` is not a use: listing a name there is exactly how a re-export is made.
Package ``__init__.py`` files are held to the same rule (a package's registry of its own modules,
such as ``from ncclcheck.probes import cuda, ...`` feeding ``PROBES``, is used, so it passes).
"""

from __future__ import annotations

import ast
import doctest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ncclcheck"

#: removed by s26-cli / s26-recrem: the lead empties this at merge.
PENDING = {
    ("ncclcheck.cli", "SEVERITIES"),
    ("ncclcheck.cluster", "printable"),
    ("ncclcheck.recommend", "NOISE"),
    ("ncclcheck.recommend", "_same"),
    ("ncclcheck.recommend", "_wrap"),
    ("ncclcheck.recommend", "footer_lines"),
    ("ncclcheck.recommend", "group_findings"),
    ("ncclcheck.recommend", "header_lines"),
    ("ncclcheck.recommend", "notes_for"),
    ("ncclcheck.recommend", "run_value"),
    ("ncclcheck.recommend", "tie_line"),
    ("ncclcheck.remote", "KILL_GRACE"),
    ("ncclcheck.remote", "MAX_OUTPUT_BYTES"),
    ("ncclcheck.remote", "OutputBuffer"),
    ("ncclcheck.remote", "ssh_failure"),
}


def module_imports(tree: ast.Module) -> dict[str, int]:
    """Names bound by imports at module level (inside module-level if/try/with too) -> line."""
    found: dict[str, int] = {}
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for a in node.names:
                if a.name != "*":
                    found[a.asname or a.name] = node.lineno
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return found


def names_in(tree: ast.AST) -> set[str]:
    """Names loaded in ``tree`` (``a`` of ``a.b.c`` included)."""
    return {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}


def parsed(source: str) -> ast.AST | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def used_names(tree: ast.Module) -> set[str]:
    used = names_in(tree)
    for node in ast.walk(tree):
        annotations = []
        if isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            annotations.append(node.annotation)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            annotations.append(node.returns)
        for annotation in annotations:
            for text in (n.value for n in ast.walk(annotation)
                         if isinstance(n, ast.Constant) and isinstance(n.value, str)):
                used |= names_in(parsed(text) or ast.Module(body=[], type_ignores=[]))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False) or ""
            for example in doctest.DocTestParser().get_examples(doc):
                used |= names_in(parsed(example.source) or ast.Module(body=[], type_ignores=[]))
    return used


def unused_imports(source: str) -> list[tuple[str, int]]:
    tree = ast.parse(source)
    used = used_names(tree)
    return sorted((name, line) for name, line in module_imports(tree).items() if name not in used)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_checker_tells_a_re_export_from_a_use():
    source = '''"""Doc.

>>> io.BytesIO(b"").read()
b''
"""
import io
import os.path
import json
from typing import Optional
from a import b, c, d, e  # noqa: F401
from f import g as h

__all__ = ["b"]


def f(x: "Optional[int]") -> "e":
    return c(x) + os.path.sep


class K:
    def m(self):
        return h
'''
    assert unused_imports(source) == [("b", 10), ("d", 10), ("json", 8)]


def test_no_module_under_ncclcheck_re_exports_or_keeps_a_dead_import():
    found = set()
    where = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, line in unused_imports(path.read_text()):
            found.add((module_name(path), name))
            where[(module_name(path), name)] = f"{path.relative_to(ROOT)}:{line}: {name}"
    new = sorted(found - PENDING)
    assert not new, ("imported and never used: a re-export (callers import the name from the "
                     "module that defines it) or a dead import:\n"
                     + "\n".join(where[k] for k in new))
    gone = sorted(PENDING - found)
    assert not gone, f"no longer re-exported: take them out of PENDING: {gone}"
