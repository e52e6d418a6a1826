"""One way for tests to load a Python file that is not an importable module: a script under
``scripts/`` (its name has dashes) or a fixture generator under ``tests/fixtures/``. The suite's
conftest puts ``tests/`` on ``sys.path``, so every test module can ``from scriptload import load``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path, name: str) -> ModuleType:
    """The module in ``path`` (absolute, or relative to the repository), run once per ``name``:
    a second call with the same name returns the first module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path if path.is_absolute() else ROOT / path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod
