"""torch stays inside ncclcheck/bench/worker.py; the rest of bench never imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent.parent / "ncclcheck"


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_the_worker_imports_torch():
    importers = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                       if any(n == "torch" or n.startswith("torch.") for n in imports_of(p)))
    assert importers == ["bench/worker.py"]
    # and nothing imports the worker at module level except through functions
    for path in PACKAGE.rglob("*.py"):
        if path.name == "worker.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "ncclcheck.bench":
                assert "worker" not in [a.name for a in node.names], path


def test_import_and_help_paths_do_not_load_torch(tmp_path):
    fixture = PACKAGE.parent / "tests" / "fixtures" / "nccl-tests" / "a3mega-h100-2x8-all_reduce.txt"
    code = ("import sys\nfrom ncclcheck.cli.main import main\n"
            "for argv in (['bench', '--help'], ['bench', '--import', %r, '--json']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "sys.stderr.write('LOADED:' + ','.join(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
            % str(fixture))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.rsplit("LOADED:", 1)[-1] == ""
