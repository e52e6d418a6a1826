"""nccl: every libnccl on the node with its exact version, and which one torch loads.

Also torch and its CUDA version (from package files, never by importing torch), NCCL plugins
(``libnccl-net*.so`` such as aws-ofi-nccl), whether libibverbs and its providers load, and the
NCCL config files.

Sources (relative to the host root):
    ``ldconfig -p`` (else etc/ld.so.conf and etc/ld.so.conf.d/*.conf), LD_LIBRARY_PATH and
    LD_PRELOAD from the allow-listed environment, the usual library folders
    (usr/lib/x86_64-linux-gnu, usr/lib64, usr/local/cuda*/lib64, opt/nccl*/lib, ...),
    <site-packages>/nvidia/nccl/lib, <site-packages>/torch/version.py,
    <site-packages>/torch-*.dist-info/METADATA, <site-packages>/nvidia_nccl_cu*.dist-info/METADATA,
    etc/libibverbs.d/*.driver, etc/nccl.conf, ~/.nccl.conf or $NCCL_CONF_FILE;
    native queries ``python_paths``, ``lib_versions`` (ncclGetVersion) and ``verbs``.

Sample ``ldconfig -p`` lines (NVIDIA/nccl#1991, Ubuntu 24.04 with the libnccl2 deb)::

    libnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2

Which libnccl torch loads: PyPI wheels of torch (2.x) depend on ``nvidia-nccl-cu12`` and set
``DT_RPATH`` ``$ORIGIN/../../nvidia/nccl/lib`` with ``patchelf --force-rpath`` "to avoid
LD_LIBRARY_PATH override" (pytorch .ci/manywheel/build_cuda.sh), and torch/__init__.py
``_preload_cuda_deps`` loads ``nvidia/nccl/lib/libnccl.so.*[0-9]`` from the first ``sys.path``
entry that has one. Only ``LD_PRELOAD`` comes before that.

The work is split by job; this module holds :func:`collect`, and each name lives in one module:
:mod:`~ncclcheck.probes.nccl.types` (the section's shapes, file names and folders),
:mod:`~ncclcheck.probes.nccl.libs` (finding libnccl files, their versions, what the loader picks),
:mod:`~ncclcheck.probes.nccl.torch` (torch and the libnccl it loads),
:mod:`~ncclcheck.probes.nccl.plugins` (NCCL plugins), :mod:`~ncclcheck.probes.nccl.verbs`
(libibverbs and its providers) and :mod:`~ncclcheck.probes.nccl.conf` (NCCL config files).
"""

from __future__ import annotations

from typing import Any, Optional

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import Host
from ncclcheck.probes.nccl.conf import _config_files
from ncclcheck.probes.nccl.libs import (_Finder, _libraries, _preloaded, _scan_install_dirs,
                                        _scan_loader, _system_loads, exists, resolve, version_key)
from ncclcheck.probes.nccl.plugins import _net_plugin, plugin_kind
from ncclcheck.probes.nccl.torch import _ask_torch_nccl, _scan_python, _torch_loads
from ncclcheck.probes.nccl.types import LIB_NAME, NcclData, Plugin
from ncclcheck.probes.nccl.verbs import _ibverbs


def collect(host: Host, errors: list[str]) -> dict[str, Any]:
    """Return :class:`NcclData` for the host."""
    env = host.environ()
    finder = _Finder(host)
    python: Optional[dict[str, Any]] = None
    try:
        python = host.query("python_paths")
        if not isinstance(python, dict):
            raise QueryFailed("the answer is not a mapping")
    except QueryFailed as exc:
        errors.append(f"python_paths: {exc}")
        python = None

    # Discovery runs in the loader's order of precedence, so found_via reads best first.
    preload = _preloaded(env)
    for entry in preload:
        if "/" in entry and LIB_NAME.match(entry.rsplit("/", 1)[-1]):
            if exists(host, entry):
                finder.add(entry, "LD_PRELOAD")
            else:
                errors.append(f"LD_PRELOAD names {entry}, which does not exist")
    torch, wheel_libs = _scan_python(finder, python)
    lookup = _scan_loader(finder, env, errors)
    _scan_install_dirs(finder, env)

    libraries = _libraries(host, finder, errors)
    by_real = {lib["realpath"]: lib for lib in libraries}
    by_path = {p: lib for lib in libraries for p in [lib["path"], *lib["aliases"]]}

    def version_of(path: Optional[str]) -> Optional[str]:
        lib = (by_path.get(path) or by_real.get(resolve(host, path))) if path else None
        return lib["version"] if lib else None

    plugins = [Plugin(path=p, realpath=resolve(host, p), name=p.rsplit("/", 1)[-1],
                      kind=plugin_kind(p.rsplit("/", 1)[-1]), found_via=via)
               for p, via in sorted(finder.plugins.items()) if exists(host, p)]
    config_files, conf_env = _config_files(host, env, python, errors)
    return dict(NcclData(
        libraries=libraries,
        versions=sorted({lib["version"] for lib in libraries if lib["version"]}, key=version_key),
        torch=torch,
        torch_loads=_torch_loads(torch, preload, wheel_libs, python, by_path, lookup, version_of),
        system_loads=_system_loads(preload, lookup, version_of),
        net_plugins=plugins, net_plugin=_net_plugin(env, lookup, host),
        ibverbs=_ibverbs(host, errors), config_files=config_files, conf_env=conf_env,
        python=python,
        torch_nccl=None if libraries else _ask_torch_nccl(host, torch, python)))
