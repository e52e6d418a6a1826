"""Finding every libnccl file as the dynamic loader would, and asking each its version.

Sources: ``ldconfig -p`` (else etc/ld.so.conf and etc/ld.so.conf.d/*.conf), LD_LIBRARY_PATH,
LD_PRELOAD, the usual library folders; the native query ``lib_versions`` (ncclGetVersion).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Callable, Optional

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import Host
from ncclcheck.probes.nccl.types import (CUDA_SUBDIRS, EXTRA_DIRS, LIB_NAME, PLUGIN_NAME,
                                        SONAME, TRUSTED_DIRS, Choice, Library)
from ncclcheck.rootpaths import follow_links



def parse_ldconfig(text: str) -> list[dict[str, str]]:
    """Entries of ``ldconfig -p`` output, in cache order (the order the loader tries them).

    Sample (NVIDIA/nccl#1991)::

        537 libs found in cache `/etc/ld.so.cache'
        \tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2

    >>> parse_ldconfig("2 libs found in cache `/etc/ld.so.cache'\\n"
    ...                "\\tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2\\n"
    ...                "\\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib64/libc.so.6\\n")
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'name': 'libnccl.so.2', 'flags': 'libc6,x86-64',
      'path': '/lib/x86_64-linux-gnu/libnccl.so.2'},
     {'name': 'libc.so.6', 'flags': 'libc6,x86-64, OS ABI: Linux 3.2.0',
      'path': '/lib64/libc.so.6'}]
    >>> parse_ldconfig("garbage\\n => \\n")
    []
    """
    entries = []
    for line in text.splitlines():
        match = re.match(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(/\S.*?)\s*$", line)
        if match:
            entries.append({"name": match.group(1), "flags": match.group(2),
                            "path": match.group(3)})
    return entries


def parse_ld_so_conf(text: str) -> tuple[list[str], list[str]]:
    """Folders and ``include`` patterns of an ld.so.conf file.

    Recorded /etc/ld.so.conf of Ubuntu 22.04 (``include /etc/ld.so.conf.d/*.conf``) and
    the CUDA 12.4 package's /etc/ld.so.conf.d/988_cuda-12.conf
    (``/usr/local/cuda-12/targets/x86_64-linux/lib``).

    >>> parse_ld_so_conf("include /etc/ld.so.conf.d/*.conf\\n\\n")
    ([], ['/etc/ld.so.conf.d/*.conf'])
    >>> parse_ld_so_conf("/usr/local/cuda-12/targets/x86_64-linux/lib\\n# comment\\n")
    (['/usr/local/cuda-12/targets/x86_64-linux/lib'], [])
    """
    dirs: list[str] = []
    includes: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include") and line[7:8].isspace():
            includes.extend(line[8:].split())
        elif line.startswith("/"):
            dirs.extend(d for d in re.split(r"[\s:,]+", line) if d.startswith("/"))
    return dirs, includes


def version_key(version: str) -> tuple[int, ...]:
    """Sort key for "2.21.5".

    >>> sorted(["2.9.9", "2.21.5", "2.18.3"], key=version_key)
    ['2.9.9', '2.18.3', '2.21.5']
    """
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def file_version(path: str) -> Optional[str]:
    """The version a file name carries, e.g. ``libnccl.so.2.21.5``.

    >>> file_version("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"), file_version("libnccl.so.2")
    ('2.21.5', None)
    """
    match = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", path)
    return match.group(1) if match else None


def _join(folder: str, name: str) -> str:
    return "/" + "/".join(p for p in (folder.strip("/"), name.strip("/")) if p)


def resolve(host: Host, path: str) -> str:
    """The real path of ``path`` inside the host root: every symlink component followed.

    Absolute link targets are taken inside the root, as the machine itself would see them; a
    link loop leaves the path as it is.
    """
    real = follow_links(path, host.readlink)
    return "/" + (real if real is not None else "/".join(p for p in path.split("/") if p))


def exists(host: Host, path: str) -> bool:
    """Whether ``path`` exists once its symlinks are followed inside the root."""
    return host.exists(resolve(host, path))


class _Finder:
    """Collects library and plugin files, with how each was found, in priority order."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.libs: dict[str, list[str]] = {}
        self.plugins: dict[str, list[str]] = {}
        self._listed: dict[str, list[str]] = {}

    def listdir(self, folder: str) -> list[str]:
        if folder not in self._listed:
            self._listed[folder] = self.host.listdir(folder)
        return self._listed[folder]

    def add(self, path: str, via: str, plugins: bool = True) -> None:
        name = path.rsplit("/", 1)[-1]
        if LIB_NAME.match(name):
            table = self.libs
        elif plugins and PLUGIN_NAME.match(name):
            table = self.plugins
        else:
            return
        vias = table.setdefault(path, [])
        if via not in vias:
            vias.append(via)

    def scan(self, folder: str, via: str, plugins: bool = True) -> None:
        for name in self.listdir(folder):
            if name.startswith("libnccl"):
                self.add(_join(folder, name), via, plugins)


def _env_dirs(value: Optional[str]) -> list[str]:
    return [d for d in (value or "").split(":") if d.startswith("/")]


def _ld_so_conf_dirs(host: Host) -> list[str]:
    dirs: list[str] = []
    pending = ["/etc/ld.so.conf"]
    seen: set[str] = set()
    while pending and len(seen) < 64:
        conf = pending.pop(0)
        if conf in seen:
            continue
        seen.add(conf)
        found, includes = parse_ld_so_conf(host.read(conf) or "")
        dirs.extend(d for d in found if d not in dirs)
        for pattern in includes:
            if not pattern.startswith("/"):
                pattern = "/etc/" + pattern
            folder, _, leaf = pattern.rpartition("/")
            pending.extend(sorted(_join(folder, n) for n in host.listdir(folder)
                                  if fnmatch.fnmatch(n, leaf)))
    return dirs


def _preloaded(env: dict[str, str]) -> list[str]:
    return [p for p in re.split(r"[\s:]+", env.get("LD_PRELOAD", "")) if p]


def _scan_loader(finder: _Finder, env: dict[str, str], errors: list[str]) -> _Lookup:
    """What the dynamic loader searches: LD_LIBRARY_PATH, the ldconfig cache, its folders."""
    host = finder.host
    ld_library_path = _env_dirs(env.get("LD_LIBRARY_PATH"))
    for folder in ld_library_path:
        finder.scan(folder, "LD_LIBRARY_PATH")
    cache: Optional[list[dict[str, str]]] = None
    result = host.run(["ldconfig", "-p"])
    if result.returncode is None and not result.timed_out:
        result = host.run(["/sbin/ldconfig", "-p"])  # not on a user's PATH on Debian
    if result.ok:
        cache = parse_ldconfig(result.stdout)
        for entry in cache:
            if entry["name"].startswith("libnccl") and exists(host, entry["path"]):
                finder.add(entry["path"], "ldconfig")
    else:
        errors.append(f"ldconfig -p: {result.why_failed()}; read etc/ld.so.conf instead")
    conf_dirs = _ld_so_conf_dirs(host)
    for folder in [*conf_dirs, *("/" + d for d in TRUSTED_DIRS)]:
        finder.scan(folder, "lib-dir")
    return _Lookup(finder, ld_library_path, cache, conf_dirs)


def _scan_install_dirs(finder: _Finder, env: dict[str, str]) -> None:
    """CUDA folders, NCCL_HOME, /opt/nccl*, /usr/local/nccl* and the usual plugin folders."""
    cuda_roots = [_join("/usr/local", n) for n in finder.listdir("usr/local")
                  if n == "cuda" or n.startswith("cuda-")]
    cuda_roots += [env[k] for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k, "").startswith("/")]
    for base in cuda_roots:
        for sub in CUDA_SUBDIRS:
            finder.scan(_join(base, sub), "cuda-dir")
    if env.get("NCCL_HOME", "").startswith("/"):
        for sub in ("lib", "lib64", "build/lib"):
            finder.scan(_join(env["NCCL_HOME"], sub), "NCCL_HOME")
    for base in ("opt", "usr/local"):
        for name in finder.listdir(base):
            if name.lower().startswith("nccl"):
                for sub in ("lib", "lib64", "build/lib"):
                    finder.scan(_join(_join(base, name), sub), "opt-dir")
    for folder in EXTRA_DIRS:
        finder.scan("/" + folder, "opt-dir")


def _libraries(host: Host, finder: _Finder, errors: list[str]) -> list[Library]:
    grouped: dict[str, Library] = {}
    for path, vias in finder.libs.items():
        if not exists(host, path):
            continue
        real = resolve(host, path)
        lib = grouped.get(real)
        if lib is None:
            grouped[real] = Library(path=path, realpath=real, aliases=[], found_via=list(vias),
                                    version=None, version_code=None,
                                    file_version=file_version(real), error=None)
            continue
        if path != lib["path"] and path not in lib["aliases"]:
            lib["aliases"].append(path)
        lib["found_via"].extend(v for v in vias if v not in lib["found_via"])
    for lib in grouped.values():
        named = [p for p in [lib["path"], *lib["aliases"]] if p.endswith("/" + SONAME)]
        if named and named[0] != lib["path"]:  # show the soname path programs ask for
            lib["aliases"].remove(named[0])
            lib["aliases"].append(lib["path"])
            lib["path"] = named[0]
        lib["aliases"].sort()
    if not grouped:
        return []
    wanted = sorted(grouped)
    try:
        answer = host.query("lib_versions", wanted)
    except QueryFailed as exc:
        errors.append(f"lib_versions: {exc}")
        answer = {}
    if not isinstance(answer, dict):
        errors.append("lib_versions: answer is not a mapping")
        answer = {}
    for real, lib in grouped.items():
        got = answer.get(real)
        if not isinstance(got, dict):
            lib["error"] = "no version answer for this file"
        elif got.get("error"):
            lib["error"] = str(got["error"])
        elif isinstance(got.get("version_code"), int):
            lib["version_code"] = got["version_code"]
            lib["version"] = got.get("version")
    return list(grouped.values())


class _Lookup:
    """Finds a library by name the way the dynamic loader would (no RPATH)."""

    def __init__(self, finder: _Finder, ld_library_path: list[str],
                 cache: Optional[list[dict[str, str]]], conf_dirs: list[str]) -> None:
        self.finder = finder
        self.ld_library_path = ld_library_path
        self.cache = cache
        self.conf_dirs = conf_dirs

    def find(self, name: str) -> tuple[Optional[str], str]:
        """(path, how) for a bare library name; (None, why not) when nothing matches."""
        for folder in self.ld_library_path:
            if name in self.finder.listdir(folder):
                return _join(folder, name), f"LD_LIBRARY_PATH entry {folder}"
        if self.cache is not None:
            for entry in self.cache:
                if entry["name"] == name and exists(self.finder.host, entry["path"]):
                    return entry["path"], "the ldconfig cache"
        else:
            for folder in self.conf_dirs:
                if name in self.finder.listdir(folder):
                    return _join(folder, name), f"ld.so.conf folder {folder} (cache not read)"
        for folder in TRUSTED_DIRS:
            if name in self.finder.listdir(folder):
                return _join("/" + folder, name), f"the default folder /{folder}"
        return None, f"no {name} on LD_LIBRARY_PATH, in the ldconfig cache or the default folders"


def _preloaded_nccl(preload: list[str]) -> Optional[str]:
    return next((p for p in preload if LIB_NAME.match(p.rsplit("/", 1)[-1])), None)


def _system_loads(preload: list[str], lookup: _Lookup,
                  version_of: Callable[[Optional[str]], Optional[str]]) -> Optional[Choice]:
    """The libnccl.so.2 a program without RPATH (nccl-tests, a C++ job) gets."""
    pre = _preloaded_nccl(preload)
    if pre:
        return Choice(path=pre, version=version_of(pre), reason=f"LD_PRELOAD names {pre}")
    path, how = lookup.find(SONAME)
    if path is None:
        return None
    return Choice(path=path, version=version_of(path),
                  reason=f"a program linked to {SONAME} without RPATH gets it from {how}")
