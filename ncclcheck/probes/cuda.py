"""cuda: the CUDA toolkits and runtime libraries (libcudart) installed, as torch's collect_env
shows them ("CUDA runtime version", "CUDA used to build PyTorch" is in the nccl section).

Sources (relative to the host root), read only, nothing is run or loaded:
    usr/local/cuda, usr/local/cuda-*, $CUDA_HOME, $CUDA_PATH: ``version.json`` (CUDA 11.1 and
    later), else ``version.txt`` (older), else the ``dist-info`` folder names of a toolkit
    assembled from wheels (``nvidia_cuda_nvcc-13.0.88.dist-info``,
    ``nvidia_cuda_runtime-13.0.96.dist-info``); their libcudart in ``lib64`` and ``targets/*/lib``;
    usr/lib/x86_64-linux-gnu, usr/lib/aarch64-linux-gnu, usr/lib64: distribution libcudart;
    <site-packages>/nvidia/cuda_runtime/lib, nvidia/cu*/lib (the ``nvidia-cuda-runtime`` wheel
    that torch pulls; its version is the one in its ``.dist-info`` folder name).

A library reached by several paths (``/usr/local/cuda`` is usually a link to ``cuda-12.4``;
``libcudart.so`` links to ``libcudart.so.12``) is listed once, by its real path.

Recorded ``/usr/local/cuda-12.4/version.json`` (cut)::

    {
       "cuda" : {
          "name" : "CUDA SDK",
          "version" : "12.4.1"
       },
       "cuda_cudart" : {
          "name" : "CUDA Runtime (cudart)",
          "version" : "12.4.127"
       },
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional, TypedDict

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import Host, Unavailable
from ncclcheck.probes.nccl.libs import resolve

SYSTEM_LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64")
CUDART = re.compile(r"^libcudart\.so(\.\d+)*$")


class CudaData(TypedDict):
    """The ``cuda`` section's data."""

    toolkits: list[dict[str, Any]]   # {"path", "version", "cudart_version", "source", "aliases",
                                     #  "compat": the cuda-compat libcuda's driver version}
    runtimes: list[dict[str, Any]]   # {"path", "version", "found_via"}


def parse_version_json(text: str) -> dict[str, Optional[str]]:
    """The toolkit and cudart versions of a CUDA ``version.json``.

    >>> parse_version_json('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, '
    ...                    '"cuda_cudart": {"version": "12.4.127"}}')
    {'version': '12.4.1', 'cudart_version': '12.4.127'}
    >>> parse_version_json("not json")
    {'version': None, 'cudart_version': None}
    """
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return {"version": None, "cudart_version": None}

    def version(key: str) -> Optional[str]:
        item = doc.get(key)
        value = item.get("version") if isinstance(item, dict) else None
        return value if isinstance(value, str) else None

    return {"version": version("cuda"), "cudart_version": version("cuda_cudart")}


def parse_version_txt(text: str) -> Optional[str]:
    """The version in an old toolkit's ``version.txt``.

    >>> parse_version_txt("CUDA Version 10.2.89\\n"), parse_version_txt("")
    ('10.2.89', None)
    """
    match = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", text or "")
    return match.group(1) if match else None


def cudart_file_version(name: str) -> Optional[str]:
    """The version a libcudart file name carries (``libcudart.so.12`` carries only a major).

    >>> cudart_file_version("libcudart.so.12.4.127"), cudart_file_version("libcudart.so.12")
    ('12.4.127', '12')
    >>> cudart_file_version("libcudart.so") is None
    True
    """
    match = re.match(r"^libcudart\.so\.(\d+(?:\.\d+)*)$", name)
    return match.group(1) if match else None


def wheel_version(names: list[str], package: str = "nvidia_cuda_runtime") -> Optional[str]:
    """A wheel's version from a site-packages (or a toolkit's ``dist-info``) listing.

    >>> wheel_version(["torch", "nvidia_cuda_runtime_cu12-12.4.127.dist-info"])
    '12.4.127'
    >>> wheel_version(["nvidia_cuda_nvcc-13.0.88.dist-info"], "nvidia_cuda_nvcc")
    '13.0.88'
    """
    for name in names:
        match = re.match(rf"^{package}(?:_cu\d+)?-(\d+(?:\.\d+)*)\.dist-info$", name)
        if match:
            return match.group(1)
    return None


def _join(folder: str, name: str) -> str:
    return folder.rstrip("/") + "/" + name


_COMPAT = re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


def compat_driver(names: list[str]) -> Optional[str]:
    """The driver version of the forward-compatibility libcuda in a toolkit's ``compat/``
    folder (the cuda-compat-12-4 package installs ``/usr/local/cuda-12.4/compat/
    libcuda.so.550.54.15``), or None.

    >>> compat_driver(["libcuda.so", "libcuda.so.1", "libcuda.so.550.54.15", "libnvidia-ptxjitcompiler.so.1"])
    '550.54.15'
    >>> compat_driver([]) is None
    True
    """
    for name in names:
        found = _COMPAT.match(name)
        if found:
            return found.group(1)
    return None


def collect(host: Host, errors: list[str]) -> dict[str, Any]:
    """Return :class:`CudaData`; Unavailable when no toolkit and no libcudart is installed."""
    env = host.environ()
    roots = [_join("/usr/local", n) for n in sorted(host.listdir("/usr/local"))
             if n == "cuda" or n.startswith("cuda-")]
    roots += [env[k].rstrip("/") for k in ("CUDA_HOME", "CUDA_PATH")
              if env.get(k, "").startswith("/") and env[k].rstrip("/") not in roots]
    toolkits: list[dict[str, Any]] = []
    runtimes: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add_runtimes(folder: str, via: str, version: Optional[str] = None) -> None:
        for name in sorted(host.listdir(folder)):
            real = resolve(host, _join(folder, name))
            if CUDART.match(name) and real not in seen:
                seen.add(real)
                own = cudart_file_version(real.rsplit("/", 1)[-1])  # "12.4.127", or only "12"
                runtimes.append({"path": real, "found_via": via,
                                 "version": own if own and "." in own else (version or own)})

    by_real: dict[str, dict[str, Any]] = {}
    for root in roots:
        if not host.isdir(root):
            continue
        real = resolve(host, root)
        if real in by_real:  # /usr/local/cuda -> cuda-12.4: one toolkit, two names
            if root != real:
                by_real[real]["aliases"].append(root)
            continue
        info = parse_version_json(host.read(_join(root, "version.json")) or "")
        source = "version.json" if info["version"] else None
        if not info["version"]:
            info = {"version": parse_version_txt(host.read(_join(root, "version.txt")) or ""),
                    "cudart_version": None}
            source = "version.txt" if info["version"] else None
        if not info["version"]:
            wheels = host.listdir(_join(root, "dist-info"))
            info = {"version": wheel_version(wheels, "nvidia_cuda_nvcc"),
                    "cudart_version": wheel_version(wheels)}
            source = "dist-info" if info["version"] or info["cudart_version"] else None
        by_real[real] = {"path": real, "version": info["version"],
                         "cudart_version": info["cudart_version"], "source": source,
                         "aliases": [root] if root != real else [],
                         "compat": compat_driver(host.listdir(_join(root, "compat")))}
        toolkits.append(by_real[real])
        add_runtimes(_join(root, "lib64"), "toolkit", info["cudart_version"])
        for target in sorted(host.listdir(_join(root, "targets"))):
            add_runtimes(_join(_join(root, "targets"), target + "/lib"), "toolkit",
                         info["cudart_version"])
    for folder in SYSTEM_LIB_DIRS:
        add_runtimes("/" + folder, "system")
    for sp in _site_packages(host, errors):
        nvidia = _join(sp, "nvidia")
        for sub in sorted(host.listdir(nvidia)):
            if sub == "cuda_runtime" or re.match(r"^cu\d+$", sub):
                add_runtimes(_join(_join(nvidia, sub), "lib"), "pip wheel",
                             wheel_version(host.listdir(sp)))
    if not toolkits and not runtimes:
        raise Unavailable("no CUDA toolkit (/usr/local/cuda*) and no libcudart found")
    return dict(CudaData(toolkits=toolkits, runtimes=runtimes))


def _site_packages(host: Host, errors: list[str]) -> list[str]:
    """The Python folders the nccl probe scans (the same ``python_paths`` query)."""
    from ncclcheck.probes.nccl.torch import _python_dirs

    try:
        python = host.query("python_paths")
    except QueryFailed as exc:
        errors.append(f"python_paths: {exc}")
        python = None
    return _python_dirs(host, python if isinstance(python, dict) else None)
