"""torch and the libnccl it loads: package files read (torch is never imported here), the
``nvidia-nccl`` wheels beside it, and torch.cuda.nccl.version() asked in a child interpreter when
no libnccl is on disk. See :mod:`ncclcheck.probes.nccl` for how torch picks its library.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from ncclcheck.host.protocol import Host
from ncclcheck.probes.nccl.libs import _Finder, _join, _Lookup, _preloaded_nccl
from ncclcheck.probes.nccl.types import LIB_NAME, PYTHON_BASES, SONAME, Choice, Library, Torch



def parse_torch_version_py(text: str) -> dict[str, Optional[str]]:
    """``__version__``, ``cuda`` and ``git_version`` from torch/version.py, without running it.

    Sample (torch 2.6.0+cu124 wheel)::

        __version__ = '2.6.0+cu124'
        debug = False
        cuda: Optional[str] = '12.4'
        git_version = '2236df1770800ffea5697b11b0bb0d910b2e59e1'

    >>> parse_torch_version_py("__version__ = '2.6.0+cu124'\\ncuda: Optional[str] = '12.4'\\n"
    ...                        "git_version = '2236df1770800ffea5697b11b0bb0d910b2e59e1'\\n")
    ... # doctest: +NORMALIZE_WHITESPACE
    {'version': '2.6.0+cu124', 'cuda': '12.4',
     'git_version': '2236df1770800ffea5697b11b0bb0d910b2e59e1'}
    >>> parse_torch_version_py("__version__ = '2.13.0+cpu'\\ncuda: Optional[str] = None\\n")
    {'version': '2.13.0+cpu', 'cuda': None, 'git_version': None}
    """
    found: dict[str, Optional[str]] = {"version": None, "cuda": None, "git_version": None}
    names = {"__version__": "version", "cuda": "cuda", "git_version": "git_version"}
    for line in text.splitlines():
        match = re.match(r"^(\w+)\s*(?::[^=]*)?=\s*(.+?)\s*$", line)
        if not match or match.group(1) not in names:
            continue
        value = match.group(2)
        quoted = re.match(r"""^(['"])(.*)\1$""", value)
        found[names[match.group(1)]] = quoted.group(2) if quoted else None
    return found


def parse_dist_metadata(text: str) -> dict[str, Any]:
    """Name, Version and Requires-Dist of a METADATA / PKG-INFO file (headers only).

    Recorded: the header of the torch 2.4.1 wheel's METADATA (below, cut).

    Both requirement spellings occur: ``nvidia-nccl-cu12==2.21.5; ...`` and the older
    ``nvidia-nccl-cu12 (==2.20.5) ; ...`` (the torch 2.4.1 wheel's METADATA).

    >>> meta = parse_dist_metadata("Metadata-Version: 2.1\\nName: torch\\nVersion: 2.4.1\\n"
    ...     'Requires-Dist: nvidia-nccl-cu12 (==2.20.5) ; platform_system == "Linux"\\n\\nbody\\n')
    >>> meta["name"], meta["version"], nccl_requirement(meta["requires"])
    ('torch', '2.4.1', 'nvidia-nccl-cu12==2.20.5')
    """
    meta: dict[str, Any] = {"name": None, "version": None, "requires": []}
    for line in text.splitlines():
        if not line.strip():
            break  # the description body starts after the first blank line
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "name":
            meta["name"] = value
        elif key == "version":
            meta["version"] = value
        elif key == "requires-dist":
            meta["requires"].append(value)
    return meta


def nccl_requirement(requires: list[str]) -> Optional[str]:
    """The ``nvidia-nccl-cu*`` requirement among Requires-Dist values, as ``name==version``.

    >>> nccl_requirement(['nvidia-nccl-cu12==2.21.5; platform_system == "Linux"', 'sympy'])
    'nvidia-nccl-cu12==2.21.5'
    >>> nccl_requirement(["filelock"]) is None
    True
    """
    for req in requires:
        match = re.match(r"^\s*(nvidia[-_.]nccl[-_.]cu\d+)\s*\(?\s*([^;)]*?)\s*\)?\s*(;|$)", req,
                         re.IGNORECASE)
        if match:
            return match.group(1).lower().replace("_", "-") + match.group(2).replace(" ", "")
    return None


def _strings(python: Optional[dict[str, Any]], key: str) -> list[str]:
    """A list of absolute paths from the python_paths answer; [] when absent or malformed."""
    items = (python or {}).get(key)
    return [i for i in items if isinstance(i, str) and i.startswith("/")] \
        if isinstance(items, list) else []


def _python_dirs(host: Host, python: Optional[dict[str, Any]]) -> list[str]:
    dirs: list[str] = []
    for item in _strings(python, "sys_path") + _strings(python, "site_packages"):
        if item not in dirs:
            dirs.append(item)
    for base in PYTHON_BASES:
        for name in host.listdir(base):
            if name.startswith("python3"):
                for leaf in ("site-packages", "dist-packages"):
                    folder = _join(_join(base, name), leaf)
                    if folder not in dirs and host.isdir(folder):
                        dirs.append(folder)
    return dirs


def _torch_in(host: Host, sp: str, names: list[str]) -> Optional[Torch]:
    meta_dir = next((n for n in names if re.match(r"^torch-[^-]+\.(dist|egg)-info$", n)), None)
    if "torch" not in names and meta_dir is None:
        return None
    version_py = parse_torch_version_py(host.read(_join(sp, "torch/version.py")) or "")
    meta: dict[str, Any] = {"version": None, "requires": []}
    if meta_dir:
        leaf = "METADATA" if meta_dir.endswith(".dist-info") else "PKG-INFO"
        meta = parse_dist_metadata(host.read(_join(sp, f"{meta_dir}/{leaf}")) or "")
    if version_py["version"] is None and meta.get("version") is None:
        return None
    wheel, wheel_version = None, None
    for name in names:
        match = re.match(r"^(nvidia_nccl_cu\d+)-([^-]+)\.dist-info$", name)
        if match:
            wheel_meta = parse_dist_metadata(host.read(_join(sp, f"{name}/METADATA")) or "")
            wheel = (wheel_meta.get("name") or match.group(1)).lower().replace("_", "-")
            wheel_version = wheel_meta.get("version") or match.group(2)
            break
    return Torch(version=version_py["version"] or meta.get("version"), cuda=version_py["cuda"],
                 git_version=version_py["git_version"], path=_join(sp, "torch"),
                 site_packages=sp, nccl_requirement=nccl_requirement(meta.get("requires", [])),
                 nccl_wheel=wheel, nccl_wheel_version=wheel_version)


def _wheel_libs(finder: _Finder, sp: str, names: list[str]) -> list[str]:
    """libnccl files of the nvidia-nccl wheel(s) in one site-packages, best first."""
    if "nvidia" not in names:
        return []
    found = []
    cuda_dirs = [d for d in finder.listdir(_join(sp, "nvidia")) if re.match(r"^cu\d+$", d)]
    for sub in ["nccl", *cuda_dirs]:
        folder = _join(sp, f"nvidia/{sub}/lib")
        for name in sorted(finder.listdir(folder), key=lambda n: (n != SONAME, n)):
            if LIB_NAME.match(name) and re.search(r"\d$", name):
                found.append(_join(folder, name))
    return found


def _scan_python(finder: _Finder, python: Optional[dict[str, Any]]
                 ) -> tuple[Optional[Torch], dict[str, list[str]]]:
    """The wheel copies of libnccl in every Python install, and the first torch."""
    torch: Optional[Torch] = None
    wheel_libs: dict[str, list[str]] = {}
    for sp in _python_dirs(finder.host, python):
        names = finder.listdir(sp)
        wheel_libs[sp] = _wheel_libs(finder, sp, names)
        for path in wheel_libs[sp]:
            finder.add(path, "site-packages", plugins=False)
        if torch is None:
            torch = _torch_in(finder.host, sp, names)
        if "torch" in names:
            finder.scan(_join(sp, "torch/lib"), "torch-lib", plugins=False)
    return torch, wheel_libs


#: Asked of a CUDA torch when no libnccl is on disk (a build with NCCL linked in statically).
#: It runs in a child interpreter: ncclcheck itself never imports torch.
TORCH_NCCL_CODE = ("import torch; v = torch.cuda.nccl.version(); "
                   "print('.'.join(map(str, v)) if isinstance(v, tuple) else v)")
TORCH_NCCL_TIMEOUT_S = 60.0


def parse_torch_nccl_version(text: str) -> Optional[str]:
    """The version ``torch.cuda.nccl.version()`` printed: a tuple joined by dots (torch >= 1.13)
    or NCCL's integer code (older torch).

    >>> parse_torch_nccl_version("2.21.5\\n"), parse_torch_nccl_version("21805")
    ('2.21.5', '2.18.5')
    >>> parse_torch_nccl_version("22105"), parse_torch_nccl_version("Traceback ...")
    ('2.21.5', None)
    """
    text = text.strip().splitlines()[-1].strip() if text.strip() else ""
    if re.fullmatch(r"\d+\.\d+\.\d+", text):
        return text
    if text.isdigit():
        code = int(text)
        if code >= 20900:  # NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z from 2.9 on
            return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return None


def _ask_torch_nccl(host: Host, torch: Optional[Torch],
                    python: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """torch.cuda.nccl.version() from the interpreter that holds this torch, or None when
    there is no CUDA torch to ask."""
    if not torch or not torch["cuda"] or not python or not python.get("executable"):
        return None
    if torch["site_packages"] not in (*_strings(python, "sys_path"),
                                      *_strings(python, "site_packages")):
        return {"version": None, "error": "torch is not in the probing interpreter's path"}
    result = host.run([str(python["executable"]), "-c", TORCH_NCCL_CODE],
                      timeout=TORCH_NCCL_TIMEOUT_S)
    version = parse_torch_nccl_version(result.stdout) if result.returncode == 0 else None
    if version:
        return {"version": version, "error": None}
    why = (result.stderr.strip().splitlines() or ["no answer"])[-1]
    return {"version": None, "error": f"torch.cuda.nccl.version(): {why[:200]}"}


def _torch_loads(torch: Optional[Torch], preload: list[str], wheel_libs: dict[str, list[str]],
                 python: Optional[dict[str, Any]], by_path: dict[str, Library], lookup: _Lookup,
                 version_of: Callable[[Optional[str]], Optional[str]]) -> Optional[Choice]:
    """The libnccl torch would load, in the order the loader and torch/__init__.py decide."""
    if torch is None:
        return None

    def choice(path: Optional[str], reason: str) -> Choice:
        return Choice(path=path, version=version_of(path), reason=reason)

    label = f"torch {torch['version']}"
    if torch["cuda"] is None:
        return choice(None, f"{label} is a CPU-only build (torch/version.py cuda = None): "
                            "it loads no NCCL")
    pre = _preloaded_nccl(preload)
    if pre:
        return choice(pre, f"LD_PRELOAD names {pre}: the loader maps it before torch starts, "
                           f"and torch's {SONAME} dependency binds to it")
    own = wheel_libs.get(torch["site_packages"]) or []
    if own:
        wheel = " ".join(filter(None, [torch["nccl_wheel"] or "nvidia-nccl",
                                        torch["nccl_wheel_version"]]))
        return choice(own[0], f"{label} loads the {wheel} wheel's copy beside it: its libraries "
                              "carry DT_RPATH $ORIGIN/../../nvidia/nccl/lib, which beats "
                              "LD_LIBRARY_PATH")
    for folder in _strings(python, "sys_path"):
        if wheel_libs.get(folder):
            return choice(wheel_libs[folder][0],
                          f"{label} has no NCCL wheel beside it; torch/__init__.py "
                          f"_preload_cuda_deps takes the first sys.path entry with "
                          f"nvidia/nccl/lib: {folder}")
    bundled = sorted(p for p in by_path if p.startswith(torch["path"] + "/lib/"))
    if bundled:
        return choice(bundled[0], f"{label} bundles {bundled[0].rsplit('/', 1)[-1]} in torch/lib")
    path, how = lookup.find(SONAME)
    if path is None:
        return choice(None, f"{label} (CUDA {torch['cuda']}) requires no NCCL wheel and the "
                            f"loader finds none: NCCL is linked into torch statically, or "
                            f"torch will fail to load ({how})")
    return choice(path, f"{label} requires no NCCL wheel: if it links {SONAME} dynamically "
                        f"(NGC or source builds), the loader finds {path} through {how}; "
                        "a static build uses its own copy")
