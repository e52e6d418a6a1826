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
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ncclcheck"

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
    """Names loaded anywhere in the module, in string annotations and in doctests (one walk)."""
    used: set[str] = set()
    more: list[str] = []  # annotation strings and doctest sources
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                used.add(node.id)
            continue
        annotations = []
        if isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            annotations.append(node.returns)
        for annotation in annotations:
            more += [n.value for n in ast.walk(annotation)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False) or ""
            if ">>>" in doc:
                more += [e.source for e in doctest.DocTestParser().get_examples(doc)]
    for text in more:
        used |= names_in(parsed(text) or ast.Module(body=[], type_ignores=[]))
    return used


def unused_imports(source: str | ast.Module) -> list[tuple[str, int]]:
    tree = ast.parse(source) if isinstance(source, str) else source
    used = used_names(tree)
    return sorted((name, line) for name, line in module_imports(tree).items() if name not in used)


@functools.lru_cache(maxsize=None)
def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


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
        for name, line in unused_imports(tree_of(path)):
            found.add((module_name(path), name))
            where[(module_name(path), name)] = f"{path.relative_to(ROOT)}:{line}: {name}"
    assert not found, ("imported and never used: a re-export (callers import the name from the "
                       "module that defines it) or a dead import:\n"
                       + "\n".join(where[k] for k in sorted(found)))


def defined_names(tree: ast.Module) -> set[str]:
    """What a module defines at top level (def, class, assignment; inside if/try too)."""
    found: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.items[0].optional_vars] if isinstance(node, ast.With)
                       else [node.target])
            found |= {n.id for t in targets if t is not None for n in ast.walk(t)
                      if isinstance(n, ast.Name)}
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return found


def test_callers_import_each_name_from_the_module_that_defines_it():
    """``from ncclcheck.x import name`` (in ncclcheck/, tests/, scripts/): x defines name, or
    name is a module of package x. Importing it through a module that merely imports it too is
    the second path this file is about, seen from the caller's side."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    defines = {m: defined_names(tree_of(p)) for m, p in modules.items()}
    sources = [p for d in ("ncclcheck", "tests", "scripts") for p in (ROOT / d).rglob("*")
               if p.is_file() and "fixtures" not in p.parts and "__pycache__" not in p.parts
               and (p.suffix == ".py" or (p.suffix == "" and p.read_bytes()[:2] == b"#!"
                                          and b"python" in p.read_bytes().split(b"\n", 1)[0]))]
    found, where = set(), {}
    for path in sorted(sources):
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in modules:
                for a in node.names:
                    if (a.name not in defines[node.module]
                            and f"{node.module}.{a.name}" not in modules):
                        key = (str(path.relative_to(ROOT)), node.module, a.name)
                        found.add(key)
                        where[key] = f"{key[0]}:{node.lineno}: {a.name} from {node.module}"
    assert not found, ("imported from a module that does not define it: import it from the one "
                       "that does:\n" + "\n".join(where[k] for k in sorted(found)))
